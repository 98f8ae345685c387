"""Every finding code, once: its default severity, the judges that raise it, its group, its docs.

One line a code. A policy can change a code's severity (``[severity]`` in a policy file, ``--set
severity.CODE=LEVEL``); the JUnit file has one test case per code a judge checks, grouped by
``group``; ``doc`` is where a user reads what it means, its evidence and its fix.
"""

from __future__ import annotations

import dataclasses

from alignprobe.findings.severity import Severity

COMPARE, AUDIT, ACCEPT = "compare", "audit", "accept"


@dataclasses.dataclass(frozen=True)
class Code:
    name: str
    severity: Severity  # the default; "numeric_drift" and "degenerate" escalate past a fail tolerance
    judges: tuple[str, ...]
    group: str  # what kind of check: the JUnit class name and the docs section
    doc: str  # docs page and anchor


def _c(name: str, severity: Severity, judges: tuple[str, ...], group: str, page: str = "docs/findings.md") -> Code:
    return Code(name, severity, judges, group, f"{page}#{name}")


_AUDIT_DOC = "docs/audit.md"
_DRAFTER_DOC = "docs/findings.md"

CODES: dict[str, Code] = {c.name: c for c in (
    # the inputs themselves
    _c("same_dump", "error", (COMPARE,), "inputs"),
    _c("dumps_swapped", "error", (COMPARE,), "inputs"),
    _c("dtype_mismatch", "info", (COMPARE,), "inputs"),
    # samples and tokens
    _c("sample_mismatch", "warn", (COMPARE,), "tokens"),
    _c("no_aligned_tokens", "error", (COMPARE,), "tokens"),
    _c("token_mismatch", "warn", (COMPARE,), "tokens"),
    _c("token_shift", "warn", (COMPARE,), "tokens"),
    _c("token_padding", "info", (COMPARE,), "tokens"),
    _c("short_rows", "warn", (COMPARE, AUDIT), "tokens"),
    # which state each serve slice is
    _c("width_mismatch", "error", (COMPARE,), "layout"),
    _c("layer_offset", "error", (COMPARE,), "layout"),
    _c("wrong_taps", "error", (COMPARE,), "layout"),
    _c("final_norm_mismatch", "error", (COMPARE,), "layout"),
    _c("mapping_ambiguous", "info", (COMPARE,), "layout"),
    _c("claim_mismatch", "info", (COMPARE,), "layout"),
    _c("duplicate_tap", "error", (COMPARE,), "layout"),
    # how far the states are apart
    _c("scale_mismatch", "error", (COMPARE,), "numeric"),
    _c("numeric_drift", "warn", (COMPARE,), "numeric"),
    _c("position_drift", "warn", (COMPARE,), "numeric"),
    _c("nonfinite", "error", (COMPARE, AUDIT), "numeric"),
    _c("degenerate", "warn", (COMPARE, AUDIT), "numeric"),
    # what the explanations name (compare/explain/)
    _c("row_shift", "error", (COMPARE,), "explained"),
    _c("foreign_rows", "error", (COMPARE,), "explained"),
    _c("residual_split", "error", (COMPARE,), "explained"),
    _c("channel_scale", "error", (COMPARE,), "explained"),
    _c("rotated", "error", (COMPARE,), "explained"),
    _c("channels_permuted", "error", (COMPARE,), "explained"),
    _c("saturated", "error", (COMPARE,), "explained"),
    _c("dtype_misread", "error", (COMPARE,), "explained"),
    _c("unexplained", "error", (COMPARE,), "explained"),
    # a drafter against the dumps and its target (alignprobe accept, compare --drafter)
    _c("drafter_tap_ids", "error", (ACCEPT,), "drafter", _DRAFTER_DOC),
    _c("drafter_tap_collision", "error", (ACCEPT,), "drafter", _DRAFTER_DOC),
    _c("drafter_hidden_width", "error", (ACCEPT,), "drafter", _DRAFTER_DOC),
    _c("drafter_vocab_map", "error", (ACCEPT,), "drafter", _DRAFTER_DOC),
    _c("drafter_norm_flags", "error", (ACCEPT,), "drafter", _DRAFTER_DOC),
    _c("drafter_target_vocab", "error", (ACCEPT,), "drafter", _DRAFTER_DOC),
    _c("drafter_use_aux", "error", (ACCEPT,), "drafter", _DRAFTER_DOC),
    # a training set's own data faults (alignprobe audit)
    _c("unreadable_file", "error", (AUDIT,), "data", _AUDIT_DOC),
    _c("rows_tokens_mismatch", "error", (AUDIT,), "data", _AUDIT_DOC),
    _c("empty_sample", "warn", (AUDIT,), "data", _AUDIT_DOC),
    _c("repeated_tap", "error", (AUDIT,), "data", _AUDIT_DOC),
    _c("norm_outlier", "warn", (AUDIT,), "data", _AUDIT_DOC),
    _c("recurring_norm_outlier", "info", (AUDIT,), "data", _AUDIT_DOC),
    _c("padding_states", "warn", (AUDIT,), "data", _AUDIT_DOC),
    _c("duplicate_samples", "warn", (AUDIT,), "data", _AUDIT_DOC),
    _c("template_split", "warn", (AUDIT,), "data", _AUDIT_DOC),
    _c("empty_loss_mask", "warn", (AUDIT,), "data", _AUDIT_DOC),
    _c("tokens_differ_from_dataset", "warn", (AUDIT,), "data", _AUDIT_DOC),
    _c("loss_mask_coverage", "info", (AUDIT,), "data", _AUDIT_DOC),
)}


def code(name: str) -> Code:
    """The registered code ``name``; an unregistered one is a bug in alignprobe, not bad input."""
    try:
        return CODES[name]
    except KeyError:
        raise KeyError(f"finding code {name!r} is not registered in alignprobe/findings/codes.py") from None


def codes_of(judge: str) -> list[str]:
    """The codes a judge checks, in registry order (the JUnit file lists each as a test case)."""
    return [c.name for c in CODES.values() if judge in c.judges]
