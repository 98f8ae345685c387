"""Read rows of a dump's datasets as whole chunks, with ``os.preadv`` from several threads.

h5py holds one global lock through every call and HDF5 reads a chunk at a time, so a reader gets
one request in flight, whatever its threads. A dump's streams are chunked, unfiltered, and stored
in the machine's byte order (alignprobe/dump/layout.py), so a chunk on disk is its values in row
order: where that holds, the chunks a read needs are located through HDF5 (the only call under its
lock) and read with ``os.preadv`` straight into their place, several at once. Anything else (filters,
another byte order, a chunk never written) is read through h5py as before, so results are the same
byte for byte; the file is opened read-only.
"""

from __future__ import annotations

import concurrent.futures
import os
import sys

import h5py
import numpy as np

READ_THREADS = 4
DIRECT = True  # False: every read through h5py (benchmarks/compare_throughput.py measures both)


class ChunkReader:
    """Parallel whole-chunk reads of the datasets of one file."""

    def __init__(self, path: str, threads: int = READ_THREADS):
        self._fd: int | None = os.open(path, os.O_RDONLY) if DIRECT and hasattr(os, "preadv") else None
        self._pool = concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="alignprobe-chunks")
        self._places: dict[tuple[int, int, int], tuple[int, int] | None] = {}  # (dataset, band, col) -> (offset, size)
        self._direct: dict[int, bool] = {}

    def read(self, ds: h5py.Dataset, start: int, stop: int, columns: slice | None) -> np.ndarray | None:
        """Rows ``[start, stop)`` (and ``columns``) of ``ds``, or None where h5py must read them."""
        if self._fd is None or not self._readable(ds) or stop <= start:
            return None
        first_col, last_col = (0, ds.shape[1]) if columns is None else _plain_columns(columns, ds.shape[1])
        if last_col <= first_col:
            return None
        chunk_rows, chunk_cols = ds.chunks
        bands = range(start // chunk_rows, (stop - 1) // chunk_rows + 1)
        cols = range(first_col // chunk_cols, (last_col - 1) // chunk_cols + 1)
        places = {(b, c): self._place(ds, b, c) for b in bands for c in cols}
        if any(p is None for p in places.values()):
            return None
        out = np.empty((stop - start, last_col - first_col), dtype=ds.dtype)
        chunk_bytes = chunk_rows * chunk_cols * ds.dtype.itemsize
        if any(size != chunk_bytes for _, size in places.values()):
            return None
        jobs = []
        for (b, c), (offset, _) in places.items():
            # this chunk's part of the rows and columns asked for, in chunk and in output coordinates
            r0, r1 = max(start, b * chunk_rows), min(stop, (b + 1) * chunk_rows)
            c0, c1 = max(first_col, c * chunk_cols), min(last_col, (c + 1) * chunk_cols)
            part = (slice(r0 - b * chunk_rows, r1 - b * chunk_rows), slice(c0 - c * chunk_cols, c1 - c * chunk_cols))
            into = out[r0 - start : r1 - start, c0 - first_col : c1 - first_col]
            jobs.append(self._pool.submit(_read_chunk, self._fd, offset, (chunk_rows, chunk_cols), ds.dtype, part, into))
        for job in jobs:
            job.result()
        return out

    def close(self) -> None:
        self._pool.shutdown()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _readable(self, ds: h5py.Dataset) -> bool:
        key = id(ds.id)
        if key not in self._direct:
            native = ds.dtype.byteorder == "=" or ds.dtype.byteorder == "|" or (
                ds.dtype.byteorder == "<") == (sys.byteorder == "little")
            self._direct[key] = (
                ds.chunks is not None and len(ds.shape) == 2 and native
                and ds.id.get_create_plist().get_nfilters() == 0
            )
        return self._direct[key]

    def _place(self, ds: h5py.Dataset, band: int, col: int) -> tuple[int, int] | None:
        key = (id(ds.id), band, col)
        if key not in self._places:
            info = ds.id.get_chunk_info_by_coord((band * ds.chunks[0], col * ds.chunks[1]))
            self._places[key] = None if info.byte_offset is None else (info.byte_offset, info.size)
        return self._places[key]


def _plain_columns(columns: slice, width: int) -> tuple[int, int]:
    first, last, step = columns.indices(width)
    return (first, last) if step == 1 else (0, 0)


def _read_chunk(fd: int, offset: int, shape: tuple[int, int], dtype, part, into: np.ndarray) -> None:
    """Read one whole chunk at ``offset`` and copy its ``part`` into ``into`` (a view of the output)."""
    chunk = np.empty(shape, dtype=dtype)
    view = memoryview(chunk).cast("B")
    done = 0
    while done < len(view):
        n = os.preadv(fd, [view[done:]], offset + done)
        if n <= 0:
            raise OSError(f"the file ends inside a chunk at byte {offset + done}: it is truncated")
        done += n
    into[...] = chunk[part]
