"""Saturated values: the serve slice is the expected train slice clipped at +-c (a state cast to a
narrow format without a scale that fits its range: FP8 E4M3 saturates at 448, so a per-tensor scale
calibrated on smaller states, or none, clips the large values and keeps the rest).

A clipped stream carries its signature: many values sit exactly at the largest magnitude, where an
unclipped one reaches its maximum once. ``c`` is that magnitude on the fit rows; the clipped train
slice is scored on the held-out rows (what is left is the format's rounding).
"""

from __future__ import annotations

import numpy as np

from alignprobe.compare.explain.base import ExplainRows, FromExpected, Key, scored
from alignprobe.compare.result import ExplanationFit

# Values at the largest magnitude (within AT_LIMIT of it), at least this many and this share of the fit
# values: bfloat16 rounding puts a clean slice's few largest values into one bucket now and then (the
# bucket is 2^-8 of the value wide), never a thousandth of all values.
MIN_AT_LIMIT = 8
MIN_AT_LIMIT_FRACTION = 1e-3
AT_LIMIT = 1e-3


class Saturated(FromExpected):
    name = "saturated"
    complexity = 5
    code = "saturated"
    fix = ('Values are clipped at +-limit: the serve side casts or stores the states in a narrow format (FP8 '
           'E4M3 saturates at 448) without a scale that fits their range, or with one calibrated on smaller '
           "states. Store them with a per-tensor or per-row scale (as speculators' FP8 connector writes "
           'hidden_states_scales), or in bfloat16.')

    def fit_pair(self, rows: ExplainRows, j: int, key: Key, a: np.ndarray, b: np.ndarray) -> ExplanationFit | None:
        magnitude = np.abs(b[rows.fit])
        limit = float(magnitude.max()) if magnitude.size else 0.0
        if not limit > 0:
            return None
        at_limit = int(np.sum(magnitude >= limit * (1 - AT_LIMIT)))
        if at_limit < max(MIN_AT_LIMIT, MIN_AT_LIMIT_FRACTION * magnitude.size):
            return None  # the maximum is reached a few times: nothing was clipped
        beyond = float(np.mean(np.abs(a[rows.fit]) > limit))  # train values the clip changed
        stored_limit = limit / rows.value_scale  # the limit in the dump's values, not the fitted rows'
        params = {"limit": stored_limit, "values_at_limit": at_limit, "fit_values": int(magnitude.size),
                  "train_values_beyond": beyond, "hf_index": key[0]}
        return scored(self, rows, np.clip(a, -limit, limit), b, params,
                      f"serve = train {rows.label(key)} clipped at +-{stored_limit:.4g} ({at_limit} fit values at the limit, "
                      f"{beyond:.2%} of train values beyond it)")


EXPLANATION = Saturated()
