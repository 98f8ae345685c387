"""Overlap reading with computing: run the next reads in a background thread while the caller works.

A streaming pass alternates "read a block" (h5py and the bf16 widening, GIL mostly released) with
"compute on it" (numpy, GIL released in its loops). Done in turn, the disk waits while the CPU works
and the CPU waits while the disk works; with the next block read ahead, a pass takes about the
longer of the two instead of their sum. h5py serialises its own calls, so one reading thread is safe
while the caller only computes.
"""

from __future__ import annotations

import collections
import concurrent.futures
from typing import Callable, Iterable, Iterator, TypeVar

T = TypeVar("T")


def read_ahead(loads: Iterable[Callable[[], T]], depth: int = 1) -> Iterator[T]:
    """Yield ``load()`` of each load in order, running up to ``depth`` of them ahead in a thread.

    ``depth=0`` runs every load in the caller's thread when it is needed (no thread at all). An
    exception raised by a load is raised here, at the point where its result would be yielded.
    """
    if depth < 1:
        for load in loads:
            yield load()
        return
    pending: collections.deque[concurrent.futures.Future] = collections.deque()
    loads = iter(loads)
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="alignprobe-read-ahead") as pool:
        try:
            for load in loads:
                pending.append(pool.submit(load))
                if len(pending) > depth:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:  # the caller stopped early: drop what was read ahead
                future.cancel()
