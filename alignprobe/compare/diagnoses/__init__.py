"""Named findings: each code's default severity, and the helper every diagnosis builds them with.

Codes are stable and documented in docs/findings.md (meaning, evidence, fix). A policy can change a
code's severity; findings on ``layers`` streams (investigation stacks, not what the drafter reads)
are capped at warn.
"""

from __future__ import annotations

from typing import Any

from alignprobe.compare.policy import Policy
from alignprobe.compare.result import SEVERITY_RANK, Finding

DEFAULT_SEVERITY = {
    "sample_mismatch": "warn",
    "no_aligned_tokens": "error",
    "token_mismatch": "warn",
    "token_shift": "warn",
    "token_padding": "info",
    "width_mismatch": "error",
    "layer_offset": "error",
    "wrong_taps": "error",
    "final_norm_mismatch": "error",
    "scale_mismatch": "error",
    "numeric_drift": "warn",  # raised to error past the fail tolerance
    "position_drift": "warn",
    "nonfinite": "error",
    "degenerate": "warn",  # raised to error past degenerate_fail_fraction
    "mapping_ambiguous": "info",
    "claim_mismatch": "info",
    # named by the explanations (compare/explain/)
    "duplicate_tap": "error",
    "row_shift": "error",
    "foreign_rows": "error",
    "residual_split": "error",
    "channel_scale": "error",
    "rotated": "error",
    "unexplained": "error",
    "channels_permuted": "error",  # a tensor-parallel gather out of rank order
    "saturated": "error",  # values clipped by a narrow format without a fitting scale
    "dtype_misread": "error",  # a 16-bit dtype's bits read as the other one
    # the inputs themselves
    "same_dump": "error",
    "dumps_swapped": "error",
    "dtype_mismatch": "info",
    "short_rows": "warn",  # samples the engine returned with fewer rows than tokens (dump marks)
}


def finding(
    code: str,
    title: str,
    evidence: dict[str, Any],
    fix: str,
    policy: Policy,
    *,
    stream: str = "",
    role: str = "",
    severity: str | None = None,
) -> Finding:
    """A finding at the policy's severity for its code if set (it pins the code), else at the given
    severity (a diagnosis escalating past a fail tolerance) or the default; then the role cap."""
    level = policy.severity.get(code) or severity or DEFAULT_SEVERITY[code]
    if role == "layers" and SEVERITY_RANK[level] > SEVERITY_RANK["warn"]:
        level = "warn"
    return Finding(code=code, severity=level, title=title, evidence=evidence, fix=fix, stream=stream)


def sort_findings(findings: list[Finding]) -> list[Finding]:
    """Most severe first; the order of discovery otherwise."""
    return sorted(findings, key=lambda f: -SEVERITY_RANK[f.severity])
