"""Samples an engine returned imperfectly, kept as returned and marked (docs/dump-format.md, "Marks").

A serving engine can hand back rows holding NaN or Inf, or fewer rows than the prompt has tokens (an
SGLang radix-cache hit or chunked prefill returns only the rows it computed: the suffix). A capture
keeps such a sample, so that the comparison can say where the bad rows are, instead of refusing the
whole capture. Two optional datasets, indexed like ``/samples/ids``, record what was wrong:

    /samples/returned_rows   [S, 2] int64  the sample-relative rows [start, stop) the engine returned;
                                           the rows outside hold NaN placeholders, not states
    /samples/nonfinite_rows  [S]    int64  rows among the returned ones holding NaN or Inf as returned

They are written only when some sample is marked; such a dump has ``format_version`` 2, so an older
alignprobe refuses it rather than reading the placeholders as what the engine returned.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import h5py
import numpy as np

from alignprobe.dump import h5_access as h5
from alignprobe.errors import BadInput

RETURNED_ROWS = "samples/returned_rows"
NONFINITE_ROWS = "samples/nonfinite_rows"
MARKS_FORMAT_VERSION = 2  # the format version of a dump that carries marks
EXAMPLES = 5  # marked samples named in the one-line summary


@dataclasses.dataclass(frozen=True)
class SampleMark:
    """What was wrong with one sample as the engine returned it."""

    length: int  # the sample's token count
    returned: tuple[int, int]  # rows [start, stop) the engine returned; the others are NaN placeholders
    nonfinite_rows: int = 0  # of the returned rows, how many hold NaN or Inf

    @property
    def short(self) -> bool:
        return self.returned != (0, self.length)

    @property
    def rows_returned(self) -> int:
        return self.returned[1] - self.returned[0]

    @property
    def marked(self) -> bool:
        return self.short or self.nonfinite_rows > 0


def whole(length: int) -> SampleMark:
    return SampleMark(length, (0, length), 0)


@dataclasses.dataclass
class Marks:
    """Every sample's mark, in dump order (``returned`` [S, 2], ``nonfinite`` [S])."""

    returned: np.ndarray
    nonfinite: np.ndarray
    lengths: np.ndarray

    def mark(self, index: int) -> SampleMark:
        start, stop = (int(v) for v in self.returned[index])
        return SampleMark(int(self.lengths[index]), (start, stop), int(self.nonfinite[index]))

    def marked_indices(self) -> np.ndarray:
        short = (self.returned[:, 0] != 0) | (self.returned[:, 1] != self.lengths)
        return np.flatnonzero(short | (self.nonfinite > 0))

    def short_indices(self) -> np.ndarray:
        return np.flatnonzero((self.returned[:, 0] != 0) | (self.returned[:, 1] != self.lengths))


def write_marks(f: h5py.File, marks: Sequence[SampleMark]) -> None:
    """Write the marks of every sample of ``f`` (in order) when any is marked; else leave ``f`` alone."""
    if not any(m.marked for m in marks):
        return
    f.create_dataset(RETURNED_ROWS, data=np.array([m.returned for m in marks], dtype=np.int64).reshape(-1, 2))
    f.create_dataset(NONFINITE_ROWS, data=np.array([m.nonfinite_rows for m in marks], dtype=np.int64))
    f.attrs["format_version"] = MARKS_FORMAT_VERSION


def read_marks(f: h5py.File, offsets: np.ndarray, where: str) -> Marks | None:
    """The marks of a dump, validated, or None when it carries none (every sample whole, as returned)."""
    samples = f.get("samples")
    present = [name for name in (RETURNED_ROWS, NONFINITE_ROWS) if name.split("/")[1] in samples]
    if not present:
        return None
    if len(present) == 1:
        missing = ({RETURNED_ROWS, NONFINITE_ROWS} - set(present)).pop()
        raise BadInput(f"{where}: /{present[0]} is there but /{missing} is missing; marks come as a pair")
    returned_ds = h5.member(f, RETURNED_ROWS, h5py.Dataset, where)
    nonfinite_ds = h5.member(f, NONFINITE_ROWS, h5py.Dataset, where)
    h5.integer_dataset(nonfinite_ds, NONFINITE_ROWS, where)
    if returned_ds.dtype.kind not in "iu" or returned_ds.ndim != 2 or returned_ds.shape[1] != 2:
        raise BadInput(f"{where}: /{RETURNED_ROWS} is {returned_ds.dtype} {returned_ds.shape}; it must be [samples, 2] integers")
    n = len(offsets) - 1
    if returned_ds.shape[0] != n or nonfinite_ds.shape[0] != n:
        raise BadInput(f"{where}: the marks hold {returned_ds.shape[0]} and {nonfinite_ds.shape[0]} entries for {n} samples")
    try:
        returned = np.asarray(returned_ds[()], dtype=np.int64)
        nonfinite = np.asarray(nonfinite_ds[()], dtype=np.int64)
    except (OSError, ValueError, RuntimeError) as exc:
        raise BadInput(f"{where}: cannot read the marks, the file is damaged ({exc})") from None
    lengths = np.diff(offsets)
    start, stop = returned[:, 0], returned[:, 1]
    bad = np.flatnonzero((start < 0) | (stop < start) | (stop > lengths) | (nonfinite < 0) | (nonfinite > stop - start))
    if len(bad):
        i = int(bad[0])
        raise BadInput(
            f"{where}: the marks of sample {i} say rows [{start[i]}, {stop[i]}) returned with {nonfinite[i]} non-finite, "
            f"for {lengths[i]} tokens"
        )
    return Marks(returned, nonfinite, lengths)


def summary_line(sample_ids: Sequence[str], marks: Marks | None) -> str:
    """One line: how many samples were kept as the engine returned them, and the first few of them."""
    if marks is None:
        return ""
    marked = marks.marked_indices()
    if not len(marked):
        return ""
    nonfinite = int((marks.nonfinite > 0).sum())
    short = marks.short_indices()
    parts = []
    for i in marked[:EXAMPLES]:
        m = marks.mark(int(i))
        what = []
        if m.short:
            what.append(f"{m.rows_returned} of {m.length} rows returned")
        if m.nonfinite_rows:
            what.append(f"{m.nonfinite_rows} NaN/Inf rows")
        parts.append(f"{sample_ids[int(i)]} ({', '.join(what)})")
    more = f", +{len(marked) - EXAMPLES} more" if len(marked) > EXAMPLES else ""
    return (f"marked {len(marked)} of {len(marks.lengths)} samples kept as the engine returned them "
            f"({nonfinite} with NaN/Inf rows, {len(short)} short): {', '.join(parts)}{more}; "
            "alignprobe compare says where")
