"""Findings as data, below every judge (compare, audit, accept) and every renderer.

- make.py         make(): a finding at the policy's severity for its code, under a cap
- record.py       Finding (frozen: code, severity, subject, evidence, title, fix, notes), Subject, Note
- codes.py        every code once: default severity, judges, group (JUnit class), docs anchor
- severity.py     severities, verdicts, the verdict of a set of findings
- resolve.py      supersession and notes between findings, settled once on structured fields
- render.py       a finding's text put together once, at output; its result.json form
- tolerances.py   the base of every judge's thresholds: ranges, policy files, --set, severities
- exit_status.py  the exit code and its reason, as the CLI and the JSON carry them
- jsonable.py     the one JSON encoding of non-finite numbers
"""

from alignprobe.findings.codes import CODES, Code, code, codes_of
from alignprobe.findings.make import make
from alignprobe.findings.record import Finding, Note, Subject
from alignprobe.findings.resolve import Annotates, Supersedes, resolve, sort_findings
from alignprobe.findings.severity import SEVERITIES, SEVERITY_RANK, VERDICTS, capped, verdict_of

__all__ = ["CODES", "Code", "code", "codes_of", "make", "Finding", "Note", "Subject", "Annotates", "Supersedes", "resolve",
           "sort_findings", "SEVERITIES", "SEVERITY_RANK", "VERDICTS", "capped", "verdict_of"]
