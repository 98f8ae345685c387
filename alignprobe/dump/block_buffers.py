"""A fixed set of read buffers that a pass reads its blocks into, handed back when a block is done.

A pass that allocates each block afresh hands glibc arrays of several MB from a reading thread and
frees them from another: they come from and go back to the system (mmap, or a thread arena that is
trimmed), so every block is page-faulted anew, and the reading thread, the pass's limit, pays for
it. A few buffers, read into again and again, cost their pages once; and since a block is read
only into a free buffer, they also bound how much a pass holds (the read-ahead waits for a block
to be done instead of reading further).
"""

from __future__ import annotations

import queue
import threading
from typing import Mapping

import numpy as np


class Aborted(Exception):
    """The pass stopped: no buffer will come back."""


class BlockBuffers:
    """``count`` sets of buffers, one a key of ``shapes`` (key -> (rows, width, dtype)).

    :meth:`take` waits for a free set; :meth:`give` returns one; :meth:`abort` releases every waiter
    (raising :class:`Aborted` in it), for a pass that stops early."""

    def __init__(self, shapes: Mapping[str, tuple[int, int, np.dtype]], count: int):
        self._free: queue.Queue[dict[str, np.ndarray]] = queue.Queue()
        for _ in range(count):
            self._free.put({key: np.empty((rows, width), dtype) for key, (rows, width, dtype) in shapes.items()})
        self._aborted = threading.Event()

    def take(self) -> dict[str, np.ndarray]:
        while not self._aborted.is_set():
            try:
                return self._free.get(timeout=0.05)
            except queue.Empty:
                continue
        raise Aborted

    def give(self, buffers: dict[str, np.ndarray]) -> None:
        self._free.put(buffers)

    def abort(self) -> None:
        self._aborted.set()
