"""Write the audit's files atomically into one folder (or any of them alone)."""

from __future__ import annotations

import dataclasses
import os

from alignprobe.audit.render.html import render_html
from alignprobe.audit.render.junit import render_junit
from alignprobe.audit.render.markdown import render_markdown
from alignprobe.audit.result import AuditResult
from alignprobe.errors import BadInput
from alignprobe.safe_paths import write_text_atomic


@dataclasses.dataclass
class AuditReportFiles:
    html: str
    markdown: str
    json: str
    junit: str


REPORT_NAMES = ("report.html", "summary.md", "result.json", "junit.xml")  # in AuditReportFiles' order


def write_audit_report(result: AuditResult, out_dir: str | os.PathLike, strict: bool = False) -> AuditReportFiles:
    out_dir = os.fspath(out_dir)
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise BadInput(f"{out_dir}: exists and is not a folder; give --report a folder")
    os.makedirs(out_dir, exist_ok=True)
    files = AuditReportFiles(*(os.path.join(out_dir, n) for n in REPORT_NAMES))
    write_text_atomic(files.html, render_html(result), "audit report")
    write_text_atomic(files.markdown, render_markdown(result), "audit report")
    write_text_atomic(files.json, result.to_json(), "audit report")
    write_text_atomic(files.junit, render_junit(result, strict), "audit report")
    return files
