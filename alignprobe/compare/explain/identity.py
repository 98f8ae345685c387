"""Identity: the serve slice is the train slice it should be (same HF index), within the noise allowed."""

from __future__ import annotations

from alignprobe.compare.explain.base import ExplainRows, Explanation, scored
from alignprobe.compare.result import ExplanationFit


class Identity(Explanation):
    name = "identity"
    complexity = 0
    judged = True

    def fit(self, rows: ExplainRows, j: int) -> ExplanationFit | None:
        key = rows.expected[j]
        if key is None or key not in rows.train:
            return None
        label = rows.label(key)
        return scored(self, rows, rows.train[key], rows.serve[:, j], {"hf_index": key[0], "label": label},
                      f"serve = train {label}, as expected", measured=rows.as_is(key, j))


EXPLANATION = Identity()
