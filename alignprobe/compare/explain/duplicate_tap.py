"""A duplicated tap: one serve slice repeats another serve slice (the engine captured a layer twice
and some expected layer never)."""

from __future__ import annotations

from alignprobe.compare.explain.base import ExplainRows, rel_rms, scored
from alignprobe.compare.result import ExplanationFit


class DuplicateTap:
    name = "duplicate_tap"
    complexity = 1

    def fit(self, rows: ExplainRows, j: int) -> ExplanationFit | None:
        k = rows.serve.shape[1]
        if k < 2:
            return None
        b = rows.serve[:, j]
        # the other slice it repeats, chosen on the fit rows; an earlier slice is the original
        others = sorted((o for o in range(k) if o != j), key=lambda o: (rel_rms(rows.serve[rows.fit, o], b[rows.fit]), o))
        source = others[0]
        if source > j and rel_rms(rows.serve[rows.fit, source], b[rows.fit]) > rows.tolerance:
            return None
        twin = next((key for key, a in rows.train.items() if rel_rms(a[rows.fit], b[rows.fit]) <= rows.tolerance), None)
        expected = rows.label(rows.expected[j]) if rows.expected[j] else "?"
        params = {"repeats_serve_slice": source, "train_slice_equal": rows.label(twin) if twin else "",
                  "missing": expected}
        return scored(self.name, self.complexity, rows, rows.serve[:, source], b, params,
                      f"serve slice {j} repeats serve slice {source}"
                      + (f" ({rows.label(twin)})" if twin else "") + f"; {expected} was never captured")
