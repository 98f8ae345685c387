"""JUnit XML from findings: what pytest, Jenkins, GitLab and GitHub test reporters already read.

One test case per code the judge checks (alignprobe/findings/codes.py), so a CI page lists every
check, passed or not, grouped by the code's group (the case's class). A code fails when a finding of
it is at severity ``error`` (``warn`` too with ``strict``); the failure's message is the finding's
title and its text the fix and the evidence. Warnings that do not fail, and notes, go to the case's
``system-out``. Every judge uses it (``compare``, ``gate``, ``audit``): give it the findings and the
judge that made them.
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from typing import Sequence

from alignprobe.findings import SEVERITY_RANK, Finding, code, codes_of, render
from alignprobe.findings.jsonable import jsonable
from alignprobe.safe_paths import write_text_atomic


def render_junit(
    findings: Sequence[Finding],
    judge: str,
    *,
    suite: str = "alignprobe",
    strict: bool = False,
    elapsed_s: float = 0.0,
    properties: dict[str, str] | None = None,
) -> str:
    """The JUnit XML document (a ``testsuites`` root holding one ``testsuite``) as text."""
    codes = list(dict.fromkeys([*codes_of(judge), *(f.code for f in findings)]))  # the registry's order, then any extra
    floor = SEVERITY_RANK["warn" if strict else "error"]
    by_code = {name: [f for f in findings if f.code == name] for name in codes}
    failing = [c for c in codes if any(SEVERITY_RANK[f.severity] >= floor for f in by_code[c])]

    root = ET.Element("testsuites", name=suite, tests=str(len(codes)), failures=str(len(failing)), errors="0",
                      time=f"{elapsed_s:.3f}")
    node = ET.SubElement(root, "testsuite", name=suite, tests=str(len(codes)), failures=str(len(failing)),
                         errors="0", skipped="0", time=f"{elapsed_s:.3f}")
    if properties:
        props = ET.SubElement(node, "properties")
        for key, value in properties.items():
            ET.SubElement(props, "property", name=str(key), value=str(value))
    prefix = suite.replace(" ", ".")
    for name in codes:
        case = ET.SubElement(node, "testcase", classname=f"{prefix}.{code(name).group}", name=name, time="0")
        failed = [f for f in by_code[name] if SEVERITY_RANK[f.severity] >= floor]
        if failed:
            message = "; ".join(render.where(f) + render.title(f) for f in failed)
            failure = ET.SubElement(case, "failure", message=message, type=failed[0].severity)
            failure.text = "\n\n".join(_details(f) for f in failed)
        quiet = [f for f in by_code[name] if f not in failed]
        if quiet:
            ET.SubElement(case, "system-out").text = "\n\n".join(f"{f.severity}: {_details(f)}" for f in quiet)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_junit(path: str | os.PathLike, findings: Sequence[Finding], judge: str, **options) -> str:
    """Write :func:`render_junit` to ``path`` atomically; returns the path."""
    write_text_atomic(path, render_junit(findings, judge, **options), "--junit")
    return os.fspath(path)


def _details(finding: Finding) -> str:
    lines = [render.where(finding) + render.title(finding)]
    fix = render.fix(finding)
    if fix:
        lines.append(f"fix: {fix}")
    if finding.evidence:
        lines.append("evidence: " + json.dumps(jsonable(finding.evidence), sort_keys=True, allow_nan=False))
    return "\n".join(lines)
