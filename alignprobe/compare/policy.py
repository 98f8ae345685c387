"""Tolerances that turn measurements into PASS / WARN / FAIL.

Defaults are documented, with how they were measured, in docs/policy.md (the measurement is
benchmarks/measure_tolerances.py). Override them with a policy file (JSON or TOML, same keys, an
optional ``[severity]`` table mapping a finding code to info/warn/error) and then with explicit
overrides (``alignprobe compare --set drift_fail_rel_rms=0.3``).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from alignprobe.errors import BadInput
from alignprobe.findings.tolerances import Tolerances
from alignprobe.number_ranges import COSINE, COSINE_DIFFERENCE, FACTOR, FRACTION, Range


@dataclasses.dataclass(frozen=True, kw_only=True)
class Policy(Tolerances):
    # Numeric drift of a correctly mapped slice: relative RMS error ||b-a||/||a|| over all rows,
    # and the 1st percentile of the per-token cosine. Beyond warn: WARN; beyond fail: FAIL.
    drift_warn_rel_rms: float = 0.055
    drift_fail_rel_rms: float = 0.07
    drift_warn_cosine_p1: float = 0.95
    drift_fail_cosine_p1: float = 0.90
    # Scale: the slice points the right way (cosine p50 at least scale_min_cosine) but its norm
    # ratio ||b||/||a|| is outside [1/(1+t), 1+t].
    scale_tolerance: float = 0.1
    scale_min_cosine: float = 0.98
    # Position drift: rel-RMS of the late positions over the early ones (positions 1..15), flagged
    # when it exceeds this factor and the late rel-RMS is past drift_warn_rel_rms.
    position_growth: float = 3.0
    # Mapping search: a serve slice whose best cosine is below mapping_min_cosine matches no train
    # slice; a best candidate less than mapping_min_margin ahead of the runner-up is ambiguous;
    # candidates within mapping_tie_cosine of the best are told apart by their norm ratio.
    mapping_min_cosine: float = 0.9
    mapping_min_margin: float = 0.002
    mapping_tie_cosine: float = 0.001
    # Explanations (compare/explain/): a transform of a train state fits a serve slice when its
    # held-out rel-RMS is within drift_fail_rel_rms; numeric drift alone (no transform) explains up
    # to explain_drift_rel_rms (benchmarks/measure_explanations.py, docs/policy.md).
    explain_drift_rel_rms: float = 0.2
    # Degenerate (all-zero or constant) rows: a warning, and a failure past this fraction of rows.
    degenerate_fail_fraction: float = 0.01

    JUDGE: ClassVar[str] = "compare"
    # What each tolerance can mean (alignprobe/number_ranges.py); any other is a non-negative number.
    RANGES: ClassVar[dict[str, Range]] = {
        "drift_warn_cosine_p1": COSINE,
        "drift_fail_cosine_p1": COSINE,
        "scale_min_cosine": COSINE,
        "mapping_min_cosine": COSINE,
        "mapping_min_margin": COSINE_DIFFERENCE,
        "mapping_tie_cosine": COSINE_DIFFERENCE,
        "degenerate_fail_fraction": FRACTION,
        "position_growth": FACTOR,
    }

    def check(self) -> None:
        if self.drift_fail_rel_rms < self.drift_warn_rel_rms:
            raise BadInput("policy: drift_fail_rel_rms must be at least drift_warn_rel_rms")
        if self.drift_fail_cosine_p1 > self.drift_warn_cosine_p1:
            raise BadInput("policy: drift_fail_cosine_p1 must be at most drift_warn_cosine_p1")
