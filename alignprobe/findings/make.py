"""The one way a judge makes a finding: at the policy's severity for its code, under a cap."""

from __future__ import annotations

from typing import Any, Mapping, Protocol

from alignprobe.findings.codes import code as registered
from alignprobe.findings.record import Finding, Note, Subject
from alignprobe.findings.severity import Severity, capped


class SeverityTable(Protocol):
    def severity_of(self, code: str, default: Severity) -> Severity: ...


def make(name: str, title: str, evidence: Mapping[str, Any], fix: str, *, policy: SeverityTable | None = None,
         subject: Subject = Subject(), severity: Severity | None = None, cap: Severity | None = None,
         notes: tuple[Note, ...] = ()) -> Finding:
    """A finding of the registered code ``name``: at the policy's severity for it where the policy sets
    one (that pins the code), else at ``severity`` (a judge escalating past a fail tolerance), else the
    code's default; then lowered to ``cap`` (a stream the drafter does not read)."""
    default = severity or registered(name).severity
    level = policy.severity_of(name, default) if policy is not None else default
    if cap is not None:
        level = capped(level, cap)
    return Finding(code=name, severity=level, title=title, evidence=dict(evidence), fix=fix, subject=subject,
                   notes=notes)
