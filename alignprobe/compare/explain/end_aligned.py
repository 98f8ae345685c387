"""The serve rows are the train sample's LAST rows, given the first tokens' ids: serve row i is train
row i + d of the same sample, d = the train sample's length minus the serve sample's (a shift of its
own in each sample). An engine with chunked prefill that returns only the last chunk's states, and a
capture that truncates the token ids to the rows it got, write exactly this (IBM/vLLM-Hook #22; vLLM
PR #52074). Those train rows lie past the common token part, which the other explanations never read:
explaining.py reads them for the expected slices only where some serve sample is a strict prefix of
its train sample (ExplainRows.end_rows). Nothing is fitted: d comes from the two lengths."""

from __future__ import annotations

import numpy as np

from alignprobe.compare.explain.base import ExplainRows, FromExpected, Key, scored
from alignprobe.compare.result import ExplanationFit

MIN_ROWS = 8  # held-out rows from shorter samples, at least, for the score to mean anything


class EndAlignedRows(FromExpected):
    name = "end_aligned_rows"
    complexity = 3  # as row_shift: a shift per sample that nothing fitted chooses
    code = "row_shift"
    fix = ("The serve rows are the sample's LAST states given its first tokens' ids (serve row i is train row i+d, d "
           "the train sample's length minus the serve one's): an engine with chunked prefill that returns only the "
           "last chunk (SGLang: --chunked-prefill-size -1), and a capture that truncates the token ids to the rows "
           "it got. The capture should place the rows it got at their positions and mark the sample short.")
    tried_where_identity_fits = False  # where identity fits, the rows are in place
    narrower_than = ("displaced_rows",)  # one shift a sample, which displaced_rows' runs would blur

    def fit_pair(self, rows: ExplainRows, j: int, key: Key, a: np.ndarray, b: np.ndarray) -> ExplanationFit | None:
        if key not in rows.end_rows:
            return None
        end = rows.end_rows[key]
        has = np.isfinite(end).all(axis=1)
        if (has & rows.held_out).sum() < MIN_ROWS:
            return None
        # one hypothesis for the whole slice: where the serve sample is shorter its rows are the train
        # sample's last ones, elsewhere the rows are in place
        predicted = np.where(has[:, None], end, a)
        shorter = sorted({int(s) for s in rows.sample[has]})
        offsets = {rows.sample_ids[s]: rows.end_offsets[s] for s in shorter}
        params = {"hf_index": key[0], "offsets": offsets, "samples_end_aligned": len(offsets),
                  "rows_end_aligned": int(has.sum())}
        return scored(self, rows, predicted, b, params,
                      f"serve row i is train row i+d of the same sample ({rows.label(key)}), d the train sample's "
                      f"length minus the serve one's ({len(offsets)} samples, d from {min(offsets.values())} to "
                      f"{max(offsets.values())}): the serve rows are the sample's last ones, given its first tokens' ids")


EXPLANATION = EndAlignedRows()
