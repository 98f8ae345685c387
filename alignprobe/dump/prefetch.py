"""Ask the OS to read a dump's chunks before they are needed (``posix_fadvise(WILLNEED)``).

HDF5 reads one chunk at a time and waits for it: from a cold page cache, one request is in flight.
A streaming pass that interleaves several datasets (compare reads four, from two files) also hides
the sequential pattern the kernel's own readahead looks for. Naming the byte ranges of the chunks
the next blocks will need queues those reads in the kernel at once, and HDF5 then finds them in the
page cache (benchmarks/compare_throughput.py). It is advice only: the file is opened read-only, the
bytes read are the same, and where ``posix_fadvise`` does not exist nothing happens.
"""

from __future__ import annotations

import os

import h5py

ENABLED = True  # benchmarks/compare_throughput.py turns it off to measure what it buys


class Prefetcher:
    """Read-ahead advice for the datasets of one file."""

    def __init__(self, path: str):
        self._fd = None
        if ENABLED and hasattr(os, "posix_fadvise"):
            try:
                self._fd = os.open(path, os.O_RDONLY)
            except OSError:
                pass  # advice is optional: the reads themselves will say what is wrong

    def rows(self, ds: h5py.Dataset, start: int, stop: int, columns: slice | None = None) -> None:
        """Advise that rows ``[start, stop)`` (and ``columns``) of ``ds`` will be read soon."""
        if self._fd is None or stop <= start:
            return
        for offset, size in _merged(chunk_ranges(ds, start, min(stop, ds.shape[0]), columns)):
            try:
                os.posix_fadvise(self._fd, offset, size, os.POSIX_FADV_WILLNEED)
            except OSError:
                return

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def chunk_ranges(ds: h5py.Dataset, start: int, stop: int, columns: slice | None = None) -> list[tuple[int, int]]:
    """File byte ranges ``(offset, size)`` holding rows ``[start, stop)`` of a 2-D dataset."""
    if stop <= start:
        return []
    row_bytes = ds.shape[1] * ds.dtype.itemsize
    if ds.chunks is None:  # contiguous: one range (None when never written)
        base = ds.id.get_offset()
        return [] if base is None else [(base + start * row_bytes, (stop - start) * row_bytes)]
    chunk_rows, chunk_cols = ds.chunks
    first_col, last_col = (0, ds.shape[1]) if columns is None else columns.indices(ds.shape[1])[:2]
    out = []
    for band in range(start // chunk_rows, (stop - 1) // chunk_rows + 1):
        for col in range(first_col // chunk_cols, max(first_col, last_col - 1) // chunk_cols + 1):
            info = ds.id.get_chunk_info_by_coord((band * chunk_rows, col * chunk_cols))
            if info.byte_offset is not None:
                out.append((info.byte_offset, info.size))
    return out


def _merged(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Adjacent or overlapping ranges joined: fewer calls for chunks written one after another."""
    out: list[list[int]] = []
    for offset, size in sorted(ranges):
        if out and offset <= out[-1][0] + out[-1][1]:
            out[-1][1] = max(out[-1][1], offset + size - out[-1][0])
        else:
            out.append([offset, size])
    return [(o, s) for o, s in out]
