"""A duplicated tap: one serve slice repeats another serve slice (the engine captured a layer twice
and some expected layer never). A layer captured twice is the same tensor written twice: the two
slices are equal to the last bit, not merely alike. Slices only alike are no duplicate: where an
embedding dominates the residual stream (scaled by sqrt(H) on one side) deep layers agree within the
drift tolerance, and calling that a repeated id sends a team to fix ids that are right."""

from __future__ import annotations

import numpy as np

from alignprobe.compare.explain.base import ExplainRows, Explanation, choice_columns, rel_rms, row_sums, scored
from alignprobe.compare.result import ExplanationFit


EXACT = 1e-6  # rel-RMS between two copies of one tensor: float32 rounding of the same values, at most


class DuplicateTap(Explanation):
    name = "duplicate_tap"
    complexity = 1
    code = "duplicate_tap"
    from_serve = True
    fix = ('Give the engine every layer id training used, each once: one aux id is repeated (or clamped to a '
           'neighbour) and another layer is never captured.')

    def fit(self, rows: ExplainRows, j: int) -> ExplanationFit | None:
        k = rows.serve.shape[1]
        if k < 2:
            return None
        b = rows.serve[:, j]
        if not self._may_repeat(rows, j):
            return None
        fit_b = b[rows.fit]
        # the other slice it repeats, chosen on the fit rows; an earlier slice is the original
        error = {o: rel_rms(rows.serve[rows.fit, o], fit_b) for o in range(k) if o != j}
        source = min(error, key=lambda o: (error[o], o))
        if error[source] > EXACT:
            return None
        own = rows.expected[j]
        if own is not None and own == rows.expected[source]:
            return None  # training holds that layer twice too (EAGLE-3's ids for N = 6: HF[2, 3, 3])
        twin = next((key for key, a in rows.train.items() if rel_rms(a[rows.fit], fit_b) <= rows.tolerance), None)
        expected = rows.label(own) if own else "?"
        params = {"repeats_serve_slice": source, "train_slice_equal": rows.label(twin) if twin else "",
                  "missing": expected}
        return scored(self, rows, rows.serve[:, source], b, params, f"serve slice {j} repeats serve slice {source}"
                      + (f" ({rows.label(twin)})" if twin else "") + f"; {expected} was never captured",
                      tolerance=EXACT)

    @staticmethod
    def _may_repeat(rows: ExplainRows, j: int) -> bool:
        """Whether some other serve slice could repeat slice j, told from a few channels first. The
        squared difference over some channels is at most that over all of them, so a slice whose
        difference on the choice columns alone exceeds EXACT (twice, a margin for rounding) of slice
        j's norm over every channel of the fit rows is no copy; where every other slice is ruled out
        so, the full test (a pass over every channel of each pair) would find no copy either, and is
        not made. On a clean comparison no slice repeats another, so this is all that is made."""
        cols = choice_columns(rows.serve.shape[2])
        some = rows.serve[:, :, cols][rows.fit]  # [fit rows, k, a few channels]
        limit = (2 * EXACT) ** 2 * float(np.sum(rows.serve_squares(j)[rows.fit], dtype=np.float64))
        return any(float(np.sum(row_sums(some[:, o] - some[:, j]), dtype=np.float64)) <= limit
                   for o in range(some.shape[1]) if o != j)


EXPLANATION = DuplicateTap()
