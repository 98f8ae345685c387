"""Overlap reading with computing: run the next reads in background threads while the caller works.

A streaming pass alternates "read a block" (h5py and the bf16 widening, GIL mostly released) with
"compute on it" (numpy, GIL released in its loops). Done in turn, the disk waits while the CPU works
and the CPU waits while the disk works; with the next block read ahead, a pass takes about the
longer of the two instead of their sum. h5py serialises its own calls, so one reading thread is safe
while the caller only computes.

This is the one prefetcher of the package: compare's blocks, import's files (ahead by bytes), the
audit's samples (an iterator advanced ahead) and SGLang's requests (several in flight) all go
through :func:`read_ahead`. What it is not: a cache (importers/decoded_files.py keeps decoded files
for reads in any order) or a page-cache warmer (audit/readahead.py reads files it never decodes).
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import functools
import itertools
from typing import Callable, Generator, Iterable, Iterator, Sequence, TypeVar

T = TypeVar("T")


def read_ahead(loads: Iterable[Callable[[], T]], depth: int = 1, *, threads: int = 1,
               sizes: Sequence[int] | None = None, budget_bytes: int = 0) -> Generator[T, None, None]:
    """Yield ``load()`` of each load in order, running up to ``depth`` of them ahead in ``threads`` threads.

    While the caller holds one result, the next ``depth`` loads run (or wait for a thread). With
    ``sizes`` (each load's bytes, in order), the loads ahead are bounded by bytes instead: as many as
    fit in ``budget_bytes`` together, none when the next alone does not (it then runs when its turn
    comes). ``depth=0`` without sizes runs every load in the caller's thread when it is needed (no
    thread at all). An exception raised by a load is raised here, at the point where its result would
    be yielded; a caller that stops early drops what was read ahead.
    """
    if depth < 1 and sizes is None:
        for load in loads:
            yield load()
        return

    def room_after(pending: collections.deque, index: int) -> bool:
        """Whether load ``index`` may start while the head of ``pending`` is the caller's next."""
        if sizes is None:
            return len(pending) <= depth
        if not pending:
            return True
        ahead = sum(sizes[i] for _, i in itertools.islice(pending, 1, None))
        return index < len(sizes) and ahead + sizes[index] <= budget_bytes

    pending: collections.deque[tuple[concurrent.futures.Future, int]] = collections.deque()
    with concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="alignprobe-read-ahead") as pool:
        try:
            for i, load in enumerate(loads):
                pending.append((pool.submit(load), i))
                while pending and not room_after(pending, i + 1):
                    yield pending.popleft()[0].result()
            while pending:
                yield pending.popleft()[0].result()
        finally:
            for future, _ in pending:
                future.cancel()


def advance_ahead(items: Iterator[T]) -> Iterator[T]:
    """The items of ``items``, the next one produced in a background thread while the caller works on
    this one (the iterator itself reads: a generator of files, say)."""
    end = object()
    with contextlib.closing(read_ahead(itertools.repeat(functools.partial(next, items, end)), 1)) as ahead:
        for item in ahead:
            if item is end:
                return
            yield item
