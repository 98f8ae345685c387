"""compare's failure classes, one module each, that make its findings (alignprobe.findings.make):

- tokens.py      sample_mismatch, token_shift, token_mismatch, token_padding, no_aligned_tokens; and
                 what a token-level cause tells the drift findings (RULES: notes resolved once)
- short_rows.py  short_rows
- inputs.py      same_dump, dumps_swapped, dtype_mismatch
- layout.py      width_mismatch, layer_offset, wrong_taps, final_norm_mismatch, claim_mismatch,
                 mapping_ambiguous: what the mapping search measured
- explained.py   what the explanations (compare/explain/<name>.py: each names its own code and fix)
                 name on a stream, and which of its measured findings they replace (REPLACED)
- numeric.py     scale_mismatch, numeric_drift, position_drift, degenerate
- nonfinite.py   nonfinite

Codes, default severities and docs are in alignprobe/findings/codes.py. A policy can change a
code's severity; findings on a stream the drafter does not read are capped at warn (:func:`cap_of`).
"""

from __future__ import annotations

from alignprobe.dump import ROLE_FINAL, ROLE_LAYERS
from alignprobe.findings.severity import Severity


def cap_of(role: str, drafter_input_compared: bool) -> Severity | None:
    """The most severe a finding on a stream of ``role`` may be: a layers stack is an investigation
    view, and with a drafter_input pair compared the final stream is not what the drafter reads
    (EAGLE-3 feeds it the aux concat only): their findings inform, at warn. Otherwise they count."""
    if role == ROLE_LAYERS or (role == ROLE_FINAL and drafter_input_compared):
        return "warn"
    return None
