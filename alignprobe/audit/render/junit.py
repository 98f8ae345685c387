"""junit.xml: one test case per check code, failed for an error finding (and, with strict, a warning).

A minimal writer of our own: the shared one (alignprobe/report/junit.py, issue 14) had not landed when
this was written; the audit should move to it once it has."""

from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

from alignprobe.audit.result import AuditResult

CODES = ("unreadable_file", "rows_tokens_mismatch", "nonfinite", "degenerate", "repeated_tap", "norm_outlier",
         "padding_states", "duplicate_samples", "template_split", "empty_loss_mask", "loss_mask_coverage")


def render_junit(result: AuditResult, strict: bool = False) -> str:
    failing = {"error", "warn"} if strict else {"error"}
    cases, failures = [], 0
    for code in CODES:
        found = [f for f in result.findings if f.code == code]
        body = ""
        bad = [f for f in found if f.severity in failing]
        if bad:
            failures += 1
            text = "\n".join(f"{f.severity}: {f.title}\nfix: {f.fix}" for f in bad)
            body = f"<failure message={quoteattr(bad[0].title)} type={quoteattr(bad[0].severity)}>{escape(text)}</failure>"
        elif found:
            body = f"<system-out>{escape(chr(10).join(f'{f.severity}: {f.title}' for f in found))}</system-out>"
        cases.append(f'  <testcase classname="alignprobe.audit" name="{code}">{body}</testcase>')
    return (f'<?xml version="1.0" encoding="utf-8"?>\n<testsuite name="alignprobe audit" tests="{len(CODES)}" '
            f'failures="{failures}" time="{result.elapsed_s:.3f}">\n' + "\n".join(cases) + "\n</testsuite>\n")
