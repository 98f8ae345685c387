"""The outputs of a run that stopped before it had a result (bad input): result.json with the error,
summary.md saying so, and a JUnit file with one errored case.

A CI job uploads the gate's folder and shows its JUnit file whatever happened; an empty folder after a
bad config says nothing, these files say why (``alignprobe gate`` writes them).
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET

from alignprobe.findings.exit_status import error_json, error_reason
from alignprobe.report.markdown import MARKER
from alignprobe.safe_paths import write_text_atomic

MARKDOWN_NAME = "summary.md"


def write_error_outputs(
    message: str,
    code: int,
    *,
    json_path: str | os.PathLike | None = None,
    report_dir: str | os.PathLike | None = None,
    junit_path: str | os.PathLike | None = None,
    suite: str = "alignprobe",
) -> list[str]:
    """Write each output given; returns the paths written (``"-"`` for the JSON on stdout)."""
    from alignprobe.report.outputs import write_json

    reason = error_reason(code)
    written = []
    if json_path is not None:
        written.append(write_json(json_path, error_json(message, code)))
    if report_dir is not None:
        os.makedirs(report_dir, exist_ok=True)
        path = os.path.join(report_dir, MARKDOWN_NAME)
        write_text_atomic(path, render_error_markdown(message, code, reason, suite), "report")
        written.append(path)
    if junit_path is not None:
        write_text_atomic(junit_path, render_error_junit(message, reason, suite), "--junit")
        written.append(os.fspath(junit_path))
    return written


def render_error_markdown(message: str, code: int, reason: str, suite: str) -> str:
    return (f"{MARKER}\n## {suite}: no verdict (exit {code}, {reason})\n\n"
            f"The run stopped before it compared anything:\n\n```\n{message}\n```\n")


def render_error_junit(message: str, reason: str, suite: str) -> str:
    """One test case, ``inputs``, in error: CI test views list the run as broken, not as passed or empty."""
    root = ET.Element("testsuites", name=suite, tests="1", failures="0", errors="1", time="0.000")
    node = ET.SubElement(root, "testsuite", name=suite, tests="1", failures="0", errors="1", skipped="0", time="0.000")
    case = ET.SubElement(node, "testcase", classname=suite.replace(" ", "."), name="inputs", time="0")
    ET.SubElement(case, "error", message=message, type=reason).text = message
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
