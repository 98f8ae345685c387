"""The audit's thresholds, each with why it is where it is; override any with ``--set KEY=VALUE``, a
policy file (the same keys, and a ``[severity]`` table of audit codes) or ``audit(policy=...)``."""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

from alignprobe.findings.tolerances import Tolerances
from alignprobe.number_ranges import FACTOR, FRACTION, NON_NEGATIVE, Range


@dataclasses.dataclass(frozen=True, kw_only=True)
class AuditPolicy(Tolerances):
    # compare's own default (compare/policy.py): more than 1% degenerate rows in a slice is an error.
    degenerate_fail_fraction: float = 0.01
    # A row norm is an outlier when its log2 lies this many robust sigmas (1.4826 * MAD of log2 norms
    # of the same slice over the whole dataset) from the median, and at least min_factor away in
    # plain ratio: the robust sigma of real hidden-state norms is small (a few percent), so the factor
    # keeps a tight distribution from flagging ordinary long-tail rows.
    norm_outlier_sigmas: float = 8.0
    norm_outlier_min_factor: float = 4.0
    # Outliers of one token (or position) in at least this many samples, the same state within half
    # an octave, are the model's own (a massive activation), not a data fault (checks/recurring.py).
    # Two samples alike can be one sample stored twice; a shared prefix of a chat set is in many more.
    norm_outlier_recurring_samples: int = 3
    # Tokens that always come together (a marker) in between this share and 1 - it of the samples
    # split the set in two templates; a marker is at least min_run distinct tokens (one token
    # alone can be any common word).
    template_split_min_share: float = 0.05
    template_split_min_run: int = 2

    JUDGE: ClassVar[str] = "audit"
    WHERE: ClassVar[str] = "audit policy"
    # What each threshold can mean (a NaN or negative one would silently flag nothing or everything).
    RANGES: ClassVar[dict[str, Range]] = {
        "degenerate_fail_fraction": FRACTION,
        "norm_outlier_sigmas": NON_NEGATIVE,
        "norm_outlier_min_factor": FACTOR,
        "norm_outlier_recurring_samples": (2.0, math.inf, "at least 2 samples"),
        "template_split_min_share": (0.0, 0.5, "a share between 0 and 0.5 (a marker splits off this share to 1 minus it)"),
        "template_split_min_run": (1.0, math.inf, "at least 1 token"),
    }
