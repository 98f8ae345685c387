"""Severities and verdicts: how bad one finding is, and what a set of findings adds up to.

A verdict is the worst severity present: an ``error`` fails, a ``warn`` warns, ``info`` passes.
"""

from __future__ import annotations

from typing import Iterable, Literal

Severity = Literal["info", "warn", "error"]
Verdict = Literal["PASS", "WARN", "FAIL"]

SEVERITIES: tuple[Severity, ...] = ("info", "warn", "error")
VERDICTS: tuple[Verdict, ...] = ("PASS", "WARN", "FAIL")
SEVERITY_RANK: dict[str, int] = {s: i for i, s in enumerate(SEVERITIES)}


def verdict_of(severities: Iterable[str]) -> Verdict:
    """The verdict of findings of these severities (PASS when there are none)."""
    worst = max((SEVERITY_RANK[s] for s in severities), default=0)
    return VERDICTS[worst]


def capped(severity: Severity, cap: Severity) -> Severity:
    """``severity``, lowered to ``cap`` where it is above it."""
    return cap if SEVERITY_RANK[severity] > SEVERITY_RANK[cap] else severity
