"""A scalar scale: the serve slice is the expected train slice times one factor (an embedding scaled
by sqrt(H) on one side, a residual multiplier, a dequantization scale left out)."""

from __future__ import annotations

import math

import numpy as np

from alignprobe.compare.explain.base import ExplainRows, FromExpected, Key, scored
from alignprobe.compare.result import ExplanationFit


def known_factor(factor: float, hidden_size: int) -> str:
    """A name for a factor that is a known constant (within 2%), else ""."""
    names = {"sqrt(H)": math.sqrt(hidden_size), "1/sqrt(H)": 1 / math.sqrt(hidden_size), "-1": -1.0}
    for name, value in names.items():
        if abs(factor / value - 1) < 0.02:
            return name
    return ""


class ScalarScale(FromExpected):
    name = "scalar_scale"
    complexity = 5
    code = "scale_mismatch"
    judged = True
    transform = True
    tried_where_identity_fits = False
    fix = ('A scale applied on one side only: an embedding multiplied by sqrt(H), a residual multiplier, a '
           'dequantization scale left out. Find where one side multiplies.')

    def fit_pair(self, rows: ExplainRows, j: int, key: Key, a: np.ndarray, b: np.ndarray) -> ExplanationFit | None:
        den = float(np.sum(a[rows.fit] ** 2))
        if den <= 0:
            return None
        factor = float(np.sum(a[rows.fit] * b[rows.fit]) / den)  # least squares on the fit rows
        named = known_factor(factor, a.shape[1])
        return scored(self, rows, factor * a, b, {"factor": factor, "known_as": named, "hf_index": key[0]},
                      f"serve = {factor:.4g} x train {rows.label(key)}" + (f" ({named})" if named else ""))


EXPLANATION = ScalarScale()
