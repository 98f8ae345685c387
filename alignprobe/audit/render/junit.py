"""junit.xml of an audit: the shared writer (alignprobe/report/junit.py), one case per audit check."""

from __future__ import annotations

from alignprobe.audit.result import AuditResult
from alignprobe.report.junit import render_junit as render_findings

CODES = ("unreadable_file", "rows_tokens_mismatch", "empty_sample", "nonfinite", "degenerate", "repeated_tap", "norm_outlier",
         "padding_states", "duplicate_samples", "template_split", "empty_loss_mask", "loss_mask_coverage")


def render_junit(result: AuditResult, strict: bool = False) -> str:
    return render_findings(result.findings, CODES, suite="alignprobe audit", strict=strict,
                           elapsed_s=result.elapsed_s,
                           properties={"verdict": result.verdict, "samples": str(result.samples),
                                       "paths": ", ".join(s.path for s in result.sources)})
