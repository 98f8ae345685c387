"""Rows from another sample or request: every serve sample's rows are the train rows, at the same
positions and HF index, of some other sample (a row swap inside a batch, every request given the
previous request's rows), or rows that match no train row at all but agree with each other across
samples (padding rows leaking from a padded batch: the pad token's states)."""

from __future__ import annotations

import numpy as np

from alignprobe.compare.explain.base import ExplainRows, scored
from alignprobe.compare.explain.row_shift import rows_at
from alignprobe.compare.result import ExplanationFit


class ForeignRows:
    name = "foreign_rows"
    complexity = 4

    def fit(self, rows: ExplainRows, j: int) -> ExplanationFit | None:
        key = rows.expected[j]
        if key is None or key not in rows.train:
            return None
        a, b = rows.train[key], rows.serve[:, j]
        samples = np.unique(rows.sample)
        if len(samples) < 2:
            return None
        predicted = np.zeros_like(b)
        sources: dict[int, int] = {}
        for s in samples:
            mine = np.flatnonzero(rows.sample == s)
            chosen_on = mine[rows.fit[mine]]  # the source sample is chosen on this sample's fit rows
            if not len(chosen_on):
                continue
            best = None
            for t in samples:
                error = float(np.sum((_guess(rows, a, t, chosen_on) - b[chosen_on]) ** 2))
                if best is None or error < best[0] * (1 - 1e-9):
                    best = (error, int(t))
            sources[int(s)] = best[1]
            predicted[mine] = _guess(rows, a, best[1], mine)  # only the winner's guess on every row
        # rows no train row of the chosen source explains: padding rows agree with each other by position
        unexplained = np.sqrt(np.sum((predicted - b) ** 2, axis=1)) > rows.tolerance * np.linalg.norm(b, axis=1)
        padding = self._padding(rows, b, unexplained)
        if padding is not None:
            predicted[unexplained] = padding[unexplained]
        # A sample whose source was not among the samples read (the first of a run, given the rows of
        # the request before it) is explained by none of them: judged on its fit rows alone, it is left
        # out of the score and named, so the others' held-out rows still decide.
        lost = [int(s) for s in samples if not self._explained(rows, predicted, b, s)]
        if 2 * len(lost) > len(samples) or len(samples) - len(lost) < 2:
            lost = []  # most samples unexplained: no source pattern to name, scored as they are
        moved = {rows.sample_ids[s]: rows.sample_ids[t] for s, t in sources.items() if s != t and s not in lost}
        if not moved and padding is None:
            return None
        order = {s: i for i, s in enumerate(samples.tolist())}
        kept_sources = {s: t for s, t in sources.items() if s not in lost}
        pattern = "other samples"
        if moved and all(order.get(t, -9) == order[s] - 1 for s, t in kept_sources.items() if s != t):
            pattern = "the previous request"
        elif moved and all(kept_sources.get(t) == s for s, t in kept_sources.items() if s != t):
            pattern = "swapped pairwise"
        keep = ~np.isin(rows.sample, lost)
        params = {"sources": moved, "samples_moved": len(moved), "samples": len(samples), "pattern": pattern,
                  "padding_rows": int(unexplained.sum()) if padding is not None else 0, "hf_index": key[0],
                  "samples_source_not_read": [rows.sample_ids[s] for s in lost]}
        what = []
        if moved:
            what.append(f"{len(moved)} of {len(samples)} samples hold the rows of {pattern}")
        if lost:
            what.append(f"{len(lost)} more whose source was not among the samples read")
        if padding is not None:
            what.append(f"{int(unexplained.sum())} rows match no train row but agree across samples (padding rows)")
        return scored(self.name, self.complexity, rows, predicted[keep], b[keep], params, "; ".join(what),
                      fit_mask=rows.fit[keep])

    @staticmethod
    def _explained(rows: ExplainRows, predicted: np.ndarray, b: np.ndarray, s) -> bool:
        """Sample s's fit rows are predicted within the tolerance (held-out rows never decide this)."""
        mine = (rows.sample == s) & rows.fit
        den = float(np.sum(b[mine] * b[mine], dtype=np.float64))
        if not mine.any() or den <= 0:
            return False
        return float(np.sqrt(np.sum((predicted[mine] - b[mine]) ** 2, dtype=np.float64) / den)) <= rows.tolerance

    @staticmethod
    def _padding(rows: ExplainRows, b: np.ndarray, unexplained: np.ndarray) -> np.ndarray | None:
        """Predict each unexplained row by the mean of the other samples' unexplained rows nearest in
        position (a pad token attending only to pads has one state at every position); None when too
        few rows are unexplained to call it padding. The row scored never predicts itself."""
        if unexplained.sum() < 4:
            return None
        out = np.zeros_like(b)
        found = False
        for r in np.flatnonzero(unexplained):
            peers = np.flatnonzero(unexplained & (rows.sample != rows.sample[r]))
            if len(peers):
                nearest = peers[np.argsort(np.abs(rows.position[peers] - rows.position[r]), kind="stable")[:4]]
                out[r] = b[nearest].mean(axis=0)
                found = True
        return out if found else None


def _guess(rows: ExplainRows, a: np.ndarray, source_sample: int, mine: np.ndarray) -> np.ndarray:
    """The train rows of ``source_sample`` at the positions of rows ``mine``. Where the source sample is
    shorter, a row keeps its own train row (a request given the previous one's rows gets them for the
    positions the previous one had), so every source is scored on the same rows."""
    source = rows_at(rows, np.full(len(mine), source_sample), rows.position[mine])
    return np.where(source[:, None] >= 0, a[np.maximum(source, 0)], a[mine])
