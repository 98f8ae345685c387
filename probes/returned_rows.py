"""One sample's rows as an engine returned them, made storable: kept, placed, and marked.

A sample whose rows hold NaN or Inf, or that came back with fewer rows than its prompt has tokens, is
kept as returned so that ``alignprobe compare`` can say where the bad rows are (which samples,
positions, slices); the dump marks it (alignprobe/dump/marks.py). A short sample's rows are the ones
the engine computed, the prompt's SUFFIX: SGLang's radix cache computes (and returns) only the tokens
after the cached prefix, chunked prefill keeps only the last chunk (docs/dump-format.md, "Marks"); vLLM's
hidden-states connector accumulates the rows of the tokens it computes, so a prefix-cache hit leaves
the cached prefix out too. The rows go to the last positions; the positions before them hold NaN
placeholders, which the mark tells from returned values.

Refused here, where nothing of the sample can be placed: more rows than tokens (which row is which
token cannot be told).
"""

from __future__ import annotations

import numpy as np

from alignprobe.dump.marks import SampleMark
from alignprobe.errors import BadInput


def placed_rows(rows, num_tokens: int, where: str, sample_id: str, fix: str):
    """``rows`` ``[r, width]`` (numpy or torch) as ``[num_tokens, width]``, short rows at the end and NaN
    before them, and the sample's :class:`SampleMark`."""
    r = int(rows.shape[0])
    check_row_count(r, num_tokens, where, sample_id, fix)
    start = num_tokens - r
    if start:
        if hasattr(rows, "new_full"):  # a torch tensor (bfloat16 has no numpy type)
            full = rows.new_full((num_tokens, rows.shape[1]), float("nan"))
        else:
            full = np.full((num_tokens, rows.shape[1]), np.nan, dtype=rows.dtype)
        full[start:] = rows
        rows = full
    return rows, SampleMark(num_tokens, (start, num_tokens), nonfinite_rows(rows[start:]))


def check_row_count(rows: int, num_tokens: int, where: str, sample_id: str, fix: str) -> None:
    if rows > num_tokens:
        raise BadInput(
            f"{where}: sample {sample_id!r} came back with {rows} rows for {num_tokens} prompt tokens; which row "
            f"belongs to which token cannot be told, so nothing of it can be compared ({fix})"
        )


def nonfinite_rows(rows) -> int:
    """Rows holding a NaN or an Inf (numpy or torch)."""
    if not rows.shape[0]:
        return 0
    if hasattr(rows, "isfinite"):
        return int((~rows.isfinite()).any(dim=1).sum())
    return int((~np.isfinite(rows)).any(axis=1).sum())


def usable(mark: SampleMark) -> bool:
    """The sample holds at least one returned, finite row: something of it can be compared."""
    return mark.rows_returned > mark.nonfinite_rows
