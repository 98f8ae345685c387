"""Findings as HTML: grouped by severity, each with its rendered title, evidence tables and fix.

Shared by the report page, the notebook view and the accept section (which lists the drafter checks).
"""

from __future__ import annotations

from typing import Any, Sequence

from alignprobe.findings import SEVERITY_RANK, Finding, render
from alignprobe.report.evidence import evidence_html
from alignprobe.report.format import escape

SEVERITY_NAMES = {"error": "Errors", "warn": "Warnings", "info": "Notes"}


def findings_html(findings: Sequence[Finding], with_evidence: bool = True, policy: dict[str, Any] | None = None) -> str:
    if not findings:
        return '<p class="ap-muted">No findings: every check passed.</p>'
    parts = []
    for severity in sorted(SEVERITY_NAMES, key=lambda s: -SEVERITY_RANK[s]):
        group = [f for f in findings if f.severity == severity]
        if not group:
            continue
        parts.append(f"<h3>{SEVERITY_NAMES[severity]} ({len(group)})</h3>")
        parts += [finding_html(f, with_evidence, policy) for f in group]
    return "\n".join(parts)


def finding_html(finding: Finding, with_evidence: bool = True, policy: dict[str, Any] | None = None) -> str:
    stream = f' <span class="ap-muted">on <code>{escape(finding.stream)}</code></span>' if finding.stream else ""
    parts = [
        f'<div class="ap-finding ap-{escape(finding.severity)}" data-code="{escape(finding.code)}">',
        f'<h3><span class="ap-sev ap-sev-{escape(finding.severity)}">{escape(finding.severity)}</span>'
        f"<code>{escape(finding.code)}</code> {escape(render.title(finding))}{stream}</h3>",
    ]
    if with_evidence and finding.evidence:
        parts.append(evidence_html(finding.evidence, policy))
    fix = render.fix(finding)
    if fix:
        parts.append(f'<p class="ap-fix"><b>Fix:</b> {escape(fix)}</p>')
    parts.append("</div>")
    return "\n".join(parts)
