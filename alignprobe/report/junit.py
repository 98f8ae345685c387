"""JUnit XML from findings: what pytest, Jenkins, GitLab and GitHub test reporters already read.

One test case per finding class checked (a finding code), so a CI page lists every check, passed or
not. A class fails when a finding of it is at severity ``error`` (``warn`` too with ``strict``); the
failure's message is the finding's title and its text the fix and the evidence. Warnings that do not
fail, and notes, go to the case's ``system-out``. Any command that produces findings can use it
(``compare``, ``gate``, an audit): give it the findings and the codes it checked.
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from typing import Iterable, Sequence

from alignprobe.compare.result import SEVERITY_RANK, Finding
from alignprobe.safe_paths import write_text_atomic


def render_junit(
    findings: Sequence[Finding],
    checked: Iterable[str],
    *,
    suite: str = "alignprobe",
    strict: bool = False,
    elapsed_s: float = 0.0,
    properties: dict[str, str] | None = None,
) -> str:
    """The JUnit XML document (a ``testsuites`` root holding one ``testsuite``) as text."""
    codes = list(dict.fromkeys([*checked, *(f.code for f in findings)]))  # checked order, then any extra
    floor = SEVERITY_RANK["warn" if strict else "error"]
    by_code = {code: [f for f in findings if f.code == code] for code in codes}
    failing = [c for c in codes if any(SEVERITY_RANK[f.severity] >= floor for f in by_code[c])]

    root = ET.Element("testsuites", name=suite, tests=str(len(codes)), failures=str(len(failing)), errors="0",
                      time=f"{elapsed_s:.3f}")
    node = ET.SubElement(root, "testsuite", name=suite, tests=str(len(codes)), failures=str(len(failing)),
                         errors="0", skipped="0", time=f"{elapsed_s:.3f}")
    if properties:
        props = ET.SubElement(node, "properties")
        for key, value in properties.items():
            ET.SubElement(props, "property", name=str(key), value=str(value))
    classname = suite.replace(" ", ".")
    for code in codes:
        case = ET.SubElement(node, "testcase", classname=classname, name=code, time="0")
        failed = [f for f in by_code[code] if SEVERITY_RANK[f.severity] >= floor]
        if failed:
            message = "; ".join(_where(f) + f.title for f in failed)
            failure = ET.SubElement(case, "failure", message=message, type=failed[0].severity)
            failure.text = "\n\n".join(_details(f) for f in failed)
        quiet = [f for f in by_code[code] if f not in failed]
        if quiet:
            ET.SubElement(case, "system-out").text = "\n\n".join(f"{f.severity}: {_details(f)}" for f in quiet)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_junit(path: str | os.PathLike, findings: Sequence[Finding], checked: Iterable[str], **options) -> str:
    """Write :func:`render_junit` to ``path`` atomically; returns the path."""
    path = os.fspath(path)
    write_text_atomic(path, render_junit(findings, checked, **options), "--junit")
    return path


def _where(finding: Finding) -> str:
    return f"[{finding.stream}] " if finding.stream else ""


def _details(finding: Finding) -> str:
    lines = [_where(finding) + finding.title]
    if finding.fix:
        lines.append(f"fix: {finding.fix}")
    if finding.evidence:
        lines.append("evidence: " + json.dumps(finding.evidence, sort_keys=True, default=str))
    return "\n".join(lines)
