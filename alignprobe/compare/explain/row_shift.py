"""Rows shifted inside a sample: serve row i is the train state of row i+k of the same sample, at
the HF index expected, while the token ids agree (a state buffer read one position off)."""

from __future__ import annotations

import numpy as np

from alignprobe.compare.explain.base import (ExplainRows, FromExpected, Key, RowFit, choice_columns, rel_rms, row_sums,
                                             scored)
from alignprobe.compare.result import ExplanationFit

MAX_SHIFT = 8


class RowShift(FromExpected):
    name = "row_shift"
    complexity = 3
    code = "row_shift"
    narrower_than = ("displaced_rows",)
    fix = ('The engine returns each state one position off although the token ids agree: check how the '
           'capture slices the prefill output (a dropped BOS row, an off-by-one in the extend offsets, '
           'chunked prefill).')

    def fit_pair(self, rows: ExplainRows, j: int, key: Key, a: np.ndarray, b: np.ndarray) -> ExplanationFit | None:
        cols = choice_columns(a.shape[1])
        ca, cb = a[:, cols], b[:, cols]
        cb_squares = row_sums(cb)  # every shift predicts some of these rows
        best = None
        for shift in (k for k in range(-MAX_SHIFT, MAX_SHIFT + 1) if k):
            source = rows.rows_at(rows.sample, rows.position + shift)
            usable = (source >= 0) & rows.fit
            if usable.sum() < 8:
                continue
            shift_error = rel_rms(ca[source[usable]], cb[usable], cb_squares[usable])
            if best is None or shift_error < best[0]:
                best = (shift_error, shift, source)
        if best is None:
            return None
        _, shift, source = best
        usable = source >= 0
        taken = source[usable]
        serve_rows, train_rows, pairs_usable = _as_slices(source, usable, shift)
        if serve_rows is not None:  # no copy of the rows: serve rows and their sources are two slices
            error = row_sums(b[serve_rows] - a[train_rows])[pairs_usable]
            dot = row_sums(a[train_rows], b[serve_rows])[pairs_usable]
        else:
            error, dot = row_sums(b[usable] - a[taken]), row_sums(a[taken], b[usable])
        # per row, the train norms and serve norms already measured for the other explanations
        shifted = RowFit(error=error, actual=rows.serve_squares(j)[usable], predicted=rows.train_squares(key)[taken],
                         dot=dot)
        params = {"shift": shift, "hf_index": key[0], "rows_usable": int(usable.sum())}
        return scored(self, rows, None, None, params,
                      f"serve row i is train row i{shift:+d} of the same sample ({rows.label(key)}), tokens identical",
                      fit_mask=rows.fit[usable], measured=shifted.scores(rows.fit[usable]))


EXPLANATION = RowShift()


def _as_slices(source: np.ndarray, usable: np.ndarray, shift: int) -> tuple[slice | None, slice | None, np.ndarray]:
    """Where every usable row's source is the row ``shift`` places on (a sample's rows are stored in
    order of position, as explaining.py gathers them): the serve rows and their train rows as two
    slices of one length, and which of those pairs are usable rows; (None, None, ...) otherwise."""
    where = np.flatnonzero(usable)
    if not np.array_equal(source[where], where + shift):
        return None, None, usable
    first, last = max(0, -shift), len(source) - max(0, shift)
    return slice(first, last), slice(first + shift, last + shift), usable[first:last]
