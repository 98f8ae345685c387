"""Files read into the OS page cache a little ahead of the scan, by a thread that holds no GIL.

Measured (cProfile, 1 GB SpecForge folder, cold): a thread that ran ``torch.load`` of the next file
while this one was scanned did not overlap at all: the load holds the GIL while it reads, so the
scan's torch calls queued behind it and the run took read + scan. Plain ``readinto`` releases the
GIL for each read, so this thread keeps the disk busy with one sequential stream while the scan
computes; the scan then maps the file (``torch.load(mmap=True)``) from the cache, with no copy.

Memory: the pages are the page cache's (the kernel drops them under pressure), plus one small
buffer here; at most ``AHEAD_BYTES`` of files are read ahead of the one being scanned.
"""

from __future__ import annotations

import concurrent.futures
import os
from typing import Sequence

from alignprobe.importers.files import READ_THROUGH_BYTES, read_through

AHEAD_BYTES = 192 << 20  # files read ahead of the scan (a few SpecForge files of H=7168)


class ReadAhead:
    """``ready(i)`` waits until file ``i`` is in the page cache and keeps the next ones coming."""

    def __init__(self, paths: Sequence[str | None]):
        self.paths: list[str | None] = []
        self.sizes: list[int] = []
        self._last: str | None = None
        self._buffer = bytearray(READ_THROUGH_BYTES)  # one thread reads: one buffer for every file
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="audit-readahead")
        self._futures: dict[int, concurrent.futures.Future] = {}
        self._next = 0
        self.extend(paths)

    def extend(self, paths: Sequence[str | None]) -> None:
        """More files after the last ones (the next unit a Dask worker is given: lanes.py), read ahead as
        if they had been given at the start. Called between ``ready`` calls, not during one."""
        for path in paths:
            # a file shared by consecutive samples (records of one file) is read once; None reads nothing
            self.paths.append(path if path != self._last else None)
            self.sizes.append(_size(path) if path is not None and path != self._last else 0)
            self._last = path

    def ready(self, index: int) -> None:
        ahead = sum(self.sizes[index + 1 : self._next])
        while self._next < len(self.paths) and (self._next <= index or ahead < AHEAD_BYTES):
            if self._next > index:
                ahead += self.sizes[self._next]
            if self.paths[self._next] is not None:
                self._futures[self._next] = self._pool.submit(read_through, self.paths[self._next], self._buffer)
            self._next += 1
        future = self._futures.pop(index, None)
        if future is not None:
            future.result()

    def window(self, first: int) -> "Window":
        """This read-ahead seen from a unit whose files start at ``first`` in ``paths``."""
        return Window(self, first)

    def close(self) -> None:
        for future in self._futures.values():
            future.cancel()
        self._pool.shutdown(wait=True)

    def __enter__(self) -> "ReadAhead":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


class Window:
    """One unit's view of a read-ahead over the files of several units scanned one after another: its
    file ``i`` is the read-ahead's ``first + i``. A read-ahead per unit let the disk idle at every
    unit's end (24 units of 256 MB in 6 GB): while its last file was scanned, its partial merged (the
    template check's token tables: ~30 ms a unit) and the next unit's first file read with nothing to
    overlap it. Measured on the H200 host (6 GB SpecForge folder, cold, one process): 0.77-0.79x of a
    raw read with a read-ahead per unit, 0.91-1.00x with this one (benchmarks/README.md)."""

    def __init__(self, ahead: ReadAhead, first: int):
        self._ahead, self._first = ahead, first

    def ready(self, index: int) -> None:
        self._ahead.ready(self._first + index)
