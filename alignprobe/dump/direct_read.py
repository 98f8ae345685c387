"""Rows of a dump's stream read straight from the file: positioned reads into their place in the block.

h5py reads a block of a chunked stream through HDF5's own per-chunk path, which on a warm page cache
ran at a quarter to a half of the rate of reading the same chunks' bytes with ``os.preadv``
(benchmarks/compare_throughput.py, ``read`` rows). A dump's streams are stored plainly (dump/layout.py:
no filters), so each chunk is a run of bytes at a file offset the HDF5 index gives once: its rows can
be read by ``os.preadv`` straight into their place in the caller's array. That is one copy instead
of two, with the GIL released, and on a many-core host the chunks of one block are read by several
threads at once.

Only streams stored plainly are read this way: chunked (every chunk allocated; chunk rows of at least
MIN_SEGMENT_BYTES where a row spans several chunks) or contiguous, no filters, no external storage, little-endian. Any other
stream, a hand-written or compressed file say, is read by h5py as before (:meth:`DirectRows.of`
returns None), and so is a column range that does not fall on chunk boundaries.
"""

from __future__ import annotations

import concurrent.futures
import os
import sys
import threading

import h5py
import numpy as np

# A stream of several column chunks is read by a segment a row: where a chunk row is shorter than this,
# h5py's copy costs less than building the segments (1024 bf16 columns broke even on a 2-core Xeon).
MIN_SEGMENT_BYTES = 2048
# Reads of a block are split over this many threads where the host has the cores (one per four, at
# most four); a block of fewer pieces is read in the caller's thread.
READ_THREADS = min(4, (os.cpu_count() or 1) // 4)
MIN_PARALLEL_PIECES = 4

_IOV_MAX = os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") and "SC_IOV_MAX" in os.sysconf_names else 1024
_pool: concurrent.futures.ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


class DirectRows:
    """Reads rows ``[start, stop)`` (and whole-chunk column ranges) of one plainly stored dataset."""

    def __init__(self, fd: int, shape: tuple[int, int], dtype: np.dtype, chunk_rows: int, chunk_columns: int,
                 offsets: np.ndarray):
        self._fd = fd
        self.shape, self.dtype = shape, dtype
        self.chunk_rows, self.chunk_columns = chunk_rows, chunk_columns
        self._offsets = offsets  # [row chunk, column chunk] -> byte offset in the file

    @classmethod
    def of(cls, fd: int, ds: h5py.Dataset) -> "DirectRows | None":
        """The direct reader of ``ds``, or None where the stream is not stored plainly."""
        if not hasattr(os, "preadv") or len(ds.shape) != 2 or not _little_endian(ds.dtype):
            return None
        plist = ds.id.get_create_plist()
        if plist.get_nfilters() or plist.get_external_count():
            return None
        rows, width = (int(n) for n in ds.shape)
        row_bytes = width * ds.dtype.itemsize
        layout = plist.get_layout()
        if layout == h5py.h5d.CONTIGUOUS:
            offset = ds.id.get_offset()
            if offset is None or rows == 0:
                return None
            # read as if chunked in runs of about 1 MiB, so the runs of a block can be read at once
            run_rows = max(1, (1 << 20) // max(1, row_bytes))
            starts = offset + np.arange(0, rows, run_rows, dtype=np.int64) * row_bytes
            return cls(fd, (rows, width), ds.dtype, run_rows, width, starts[:, None])
        if layout != h5py.h5d.CHUNKED or ds.chunks is None or rows == 0:
            return None
        chunk_rows, chunk_columns = (int(n) for n in ds.chunks)
        if width % chunk_columns or (chunk_columns < width and chunk_columns * ds.dtype.itemsize < MIN_SEGMENT_BYTES):
            return None
        grid = (-(-rows // chunk_rows), width // chunk_columns)
        if ds.id.get_num_chunks() != grid[0] * grid[1]:
            return None  # chunks never written read as the fill value: h5py knows where
        offsets = np.full(grid, -1, np.int64)

        def place(info) -> None:
            r, c = info.chunk_offset
            offsets[r // chunk_rows, c // chunk_columns] = info.byte_offset

        if hasattr(ds.id, "chunk_iter"):
            ds.id.chunk_iter(place)
        else:
            for i in range(grid[0] * grid[1]):
                place(ds.id.get_chunk_info(i))
        if (offsets < 0).any():
            return None
        return cls(fd, (rows, width), ds.dtype, chunk_rows, chunk_columns, offsets)

    def read(self, start: int, stop: int, columns: slice | None = None) -> np.ndarray | None:
        """Rows ``[start, stop)``; None where ``columns`` does not fall on chunk boundaries."""
        rows, width = self.shape
        if start < 0 or stop < 0:
            return None  # counted from the end: h5py's slicing rules
        start, stop = min(start, rows), min(stop, rows)
        first, last = 0, width
        if columns is not None:
            first, last, step = columns.indices(width)
            if step != 1 or first % self.chunk_columns or (last % self.chunk_columns and last != width):
                return None
            last = max(first, last)
        out = np.empty((max(0, stop - start), last - first), self.dtype)
        if out.size == 0:
            return out
        pieces = [
            (r, c)
            for r in range(start // self.chunk_rows, (stop - 1) // self.chunk_rows + 1)
            for c in range(first // self.chunk_columns, -(-last // self.chunk_columns))
        ]
        pool = _shared_pool() if len(pieces) >= MIN_PARALLEL_PIECES else None
        if pool is None:
            for r, c in pieces:
                self._read_piece(out, start, stop, first, r, c)
        else:
            for done in [pool.submit(self._read_piece, out, start, stop, first, r, c) for r, c in pieces]:
                done.result()
        return out

    def _read_piece(self, out: np.ndarray, start: int, stop: int, first: int, r: int, c: int) -> None:
        """The rows of chunk (r, c) that ``out`` holds, read into their place."""
        r0 = r * self.chunk_rows
        a, b = max(start, r0), min(stop, r0 + self.chunk_rows)
        column = c * self.chunk_columns - first
        dest = out[a - start : b - start, column : column + self.chunk_columns]
        segment = self.chunk_columns * self.dtype.itemsize
        position = int(self._offsets[r, c]) + (a - r0) * segment
        if dest.flags.c_contiguous:  # one column chunk: the rows are one run on both sides
            _read_fully(self._fd, [dest.data.cast("B")], position)
            return
        whole = out.data.cast("B")
        pitch = out.shape[1] * self.dtype.itemsize
        base = (a - start) * pitch + column * self.dtype.itemsize
        rows = [whole[at : at + segment] for at in range(base, base + (b - a) * pitch, pitch)]
        for i in range(0, len(rows), _IOV_MAX):
            _read_fully(self._fd, rows[i : i + _IOV_MAX], position + i * segment)


def _read_fully(fd: int, buffers: list[memoryview], position: int) -> None:
    want = sum(len(b) for b in buffers)
    got = os.preadv(fd, buffers, position)
    if got != want:  # a regular file returns less only at its end: the file was cut short
        raise OSError(f"the file ends inside a chunk (read {got} of {want} bytes at offset {position})")


def _little_endian(dtype: np.dtype) -> bool:
    order = dtype.byteorder
    return order in ("<", "|") or (order == "=" and sys.byteorder == "little")


def _shared_pool() -> concurrent.futures.ThreadPoolExecutor | None:
    global _pool
    if READ_THREADS < 2:
        return None
    with _pool_lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(READ_THREADS, thread_name_prefix="alignprobe-read")
        return _pool
