"""junit.xml of an audit: the shared writer (alignprobe/report/junit.py), one case per audit code."""

from __future__ import annotations

from alignprobe.audit.result import AuditResult
from alignprobe.report.junit import render_junit as render_findings


def render_junit(result: AuditResult, strict: bool = False) -> str:
    return render_findings(result.findings, "audit", suite="alignprobe audit", strict=strict,
                           elapsed_s=result.elapsed_s,
                           properties={"verdict": result.verdict, "samples": str(result.samples),
                                       "paths": ", ".join(s.path for s in result.sources)})
