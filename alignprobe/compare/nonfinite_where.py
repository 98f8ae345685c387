"""Where the non-finite rows are, over every row of the streaming pass: samples, positions, slices.

The kernels already flag each row holding a NaN or an Inf (RowTerms.nan_* / inf_*, numpy or torch
alike) and the accumulator already picks those rows out to leave them out of the numbers; only a
block with such a row reaches this module, so a clean comparison pays nothing for it. Memory is
bounded: the first MAX_LOCATIONS rows (in the pass's order) with their slices and side, the first
MAX_SAMPLES samples with their counts, and totals. A sample's rows come to the pass together (one
segment a sample, segments in order), so each listed sample's counts are whole.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from alignprobe.compare.kernels import RowTerms
from alignprobe.compare.pairing import Segment

MAX_LOCATIONS = 20
MAX_SAMPLES = 20


@dataclasses.dataclass
class FlaggedPair:
    """One (serve slice, train slice) pair of a block, and which of its rows are not finite."""

    serve_stream: str
    serve_slice: int
    label: str  # the train slice's label: HF[k] (the HF index the serve slice is compared as)
    hf_index: int
    terms: RowTerms
    bad: np.ndarray  # bool [rows]: a NaN or Inf on either side


@dataclasses.dataclass
class _SampleCount:
    sample_id: str
    rows: int = 0
    serve_rows: int = 0
    train_rows: int = 0
    first_position: int = -1
    last_position: int = -1
    slices: set = dataclasses.field(default_factory=set)


@dataclasses.dataclass
class _StreamWhere:
    locations: list[dict] = dataclasses.field(default_factory=list)
    samples: list[_SampleCount] = dataclasses.field(default_factory=list)
    samples_total: int = 0
    rows_total: int = 0
    last_sample: str | None = None


class NonfiniteWhere:
    """Fed by the streaming pass with its flagged blocks; :meth:`evidence` per serve stream at the end."""

    def __init__(self, segments: list[Segment]):
        self._segments = segments
        self._starts: np.ndarray | None = None  # serve rows of the segments, sorted (built at the first flag)
        self._order: np.ndarray | None = None
        self._streams: dict[str, _StreamWhere] = {}

    def add_block(self, serve_row: int, positions: np.ndarray, flagged: list[FlaggedPair]) -> None:
        """A block of the pass starting at flat serve row ``serve_row`` whose ``flagged`` pairs hold
        non-finite rows; ``positions``: each row's position in its (train) sample."""
        by_stream: dict[str, list[FlaggedPair]] = {}
        for pair in flagged:
            by_stream.setdefault(pair.serve_stream, []).append(pair)
        for stream, pairs in by_stream.items():
            self._add_stream(self._streams.setdefault(stream, _StreamWhere()), serve_row, positions, pairs)

    def _add_stream(self, into: _StreamWhere, serve_row: int, positions: np.ndarray, pairs: list[FlaggedPair]) -> None:
        bad = np.zeros(len(positions), bool)
        serve_bad, train_bad = bad.copy(), bad.copy()
        for p in pairs:
            bad |= p.bad
            serve_bad |= p.terms.nan_b | p.terms.inf_b
            train_bad |= p.terms.nan_a | p.terms.inf_a
        rows = np.flatnonzero(bad)
        samples = self._segment_of(serve_row + rows)
        into.rows_total += len(rows)
        for segment in np.unique(samples):  # ascending segment index: the pass's order
            mine = rows[samples == segment]
            sid = self._segments[int(segment)].sample_id
            if sid != into.last_sample:
                into.last_sample = sid
                into.samples_total += 1
                if len(into.samples) < MAX_SAMPLES:
                    into.samples.append(_SampleCount(sid, first_position=int(positions[mine[0]])))
            count = into.samples[-1] if into.samples and into.samples[-1].sample_id == sid else None
            if count is not None:
                count.rows += len(mine)
                count.serve_rows += int(serve_bad[mine].sum())
                count.train_rows += int(train_bad[mine].sum())
                count.last_position = int(positions[mine[-1]])
                count.slices |= {p.label for p in pairs if p.bad[mine].any()}
            for r in mine[: max(0, MAX_LOCATIONS - len(into.locations))]:
                into.locations.append(_location(sid, int(positions[r]), int(r), pairs))

    def _segment_of(self, serve_rows: np.ndarray) -> np.ndarray:
        """The index (into the segments) of the segment holding each flat serve row."""
        if self._starts is None or self._order is None:
            self._order = np.argsort([s.serve_row for s in self._segments], kind="stable")
            self._starts = np.array([self._segments[i].serve_row for i in self._order], dtype=np.int64)
        return self._order[np.searchsorted(self._starts, serve_rows, side="right") - 1]

    def evidence(self, stream: str) -> dict:
        """The ``nonfinite`` finding's evidence of where, for one serve stream ({} when it has none)."""
        where = self._streams.get(stream)
        if where is None:
            return {}
        return {
            "nonfinite_rows_total": where.rows_total,
            "nonfinite_samples_total": where.samples_total,
            "locations": where.locations,
            "samples": [
                {"sample_id": c.sample_id, "rows": c.rows, "serve_rows": c.serve_rows, "train_rows": c.train_rows,
                 "positions": f"{c.first_position}" if c.first_position == c.last_position
                 else f"{c.first_position}-{c.last_position}",
                 "slices": sorted(c.slices, key=_label_order)}
                for c in where.samples
            ],
        }


def _location(sample_id: str, position: int, row: int, pairs: list[FlaggedPair]) -> dict:
    bad = [p for p in pairs if p.bad[row]]
    serve = any(p.terms.nan_b[row] or p.terms.inf_b[row] for p in bad)
    train = any(p.terms.nan_a[row] or p.terms.inf_a[row] for p in bad)
    nan = any(p.terms.nan_a[row] or p.terms.nan_b[row] for p in bad)
    return {
        "sample_id": sample_id,
        "position": position,
        "side": "both" if serve and train else "serve" if serve else "train",
        "value": "NaN" if nan else "Inf",
        "slices": [p.label for p in bad],
        "hf_indices": [p.hf_index for p in bad],
        "serve_slices": [p.serve_slice for p in bad],
    }


def _label_order(label: str) -> tuple:
    digits = "".join(ch for ch in label if ch.isdigit())
    return (int(digits) if digits else -1, label)
