"""Identity: the serve slice is the train slice it should be (same HF index), within the noise allowed."""

from __future__ import annotations

import numpy as np

from alignprobe.compare.explain.base import ExplainRows, FromExpected, Key, scored
from alignprobe.compare.result import ExplanationFit


class Identity(FromExpected):
    name = "identity"
    complexity = 0
    judged = True

    def fit_pair(self, rows: ExplainRows, j: int, key: Key, a: np.ndarray, b: np.ndarray) -> ExplanationFit | None:
        label = rows.label(key)
        return scored(self, rows, a, b, {"hf_index": key[0], "label": label},
                      f"serve = train {label}, as expected", measured=rows.as_is(key, j))


EXPLANATION = Identity()
