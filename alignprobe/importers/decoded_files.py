"""A small, thread-safe LRU of decoded foreign files, with the next file decoded ahead in a thread.

Reading a foreign folder in place (folder_source.py) serves many small reads (the streaming pass's
blocks, a few dozen rows each) from files that must be decoded whole (``torch.load``, gzip). Each file
is decoded once into this cache and every read of its rows is a copy from it; while the pass works
through file k, file k+1 is decoded in a background thread (``torch.load`` and gzip read with the GIL
released), so the disk reads while the comparison computes. Memory is bounded by ``budget_bytes``
(at least ``keep`` files stay: the one read, the one before it (a block that spans both) and the
one decoded ahead, so a pass in order never decodes a file twice).
"""

from __future__ import annotations

import collections
import concurrent.futures
import threading
from typing import Callable, Generic, TypeVar

T = TypeVar("T")


class DecodedFiles(Generic[T]):
    """``get(k)``: file ``k`` decoded (by ``decode(k)``), once while it stays in the cache."""

    def __init__(self, decode: Callable[[int], T], size_of: Callable[[T], int], budget_bytes: int, keep: int = 3):
        self._decode, self._size_of = decode, size_of
        self.budget_bytes, self.keep = budget_bytes, keep
        self._entries: collections.OrderedDict[int, concurrent.futures.Future] = collections.OrderedDict()
        self._sizes: dict[int, int] = {}
        self._seen: set[int] = set()  # files decoded (or decoding) at some point
        self._asked: set[int] = set()  # files a prefetch was queued for
        self._lock = threading.Lock()
        self._ahead = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="alignprobe-decode-ahead")
        self.decoded = 0  # files decoded so far (a test's way to see that none was decoded twice)
        self.peak_bytes = 0  # the most decoded bytes held at once

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def holds(self, k: int) -> bool:
        """Whether file ``k`` is decoded or being decoded."""
        with self._lock:
            return k in self._entries

    def get(self, k: int) -> T:
        with self._lock:
            future = self._entries.get(k)
            mine = future is None
            if mine:
                future = self._entries[k] = concurrent.futures.Future()
                self._seen.add(k)
            self._entries.move_to_end(k)
        if mine:
            try:
                value = self._decode(k)
            except BaseException as exc:
                with self._lock:
                    self._entries.pop(k, None)  # a later read tries again (and fails the same way)
                future.set_exception(exc)
                raise
            future.set_result(value)
            with self._lock:
                self.decoded += 1
                if k in self._entries:
                    self._sizes[k] = self._size_of(value)
                self._evict(k)
        return future.result()

    def prefetch(self, k: int) -> None:
        """Decode file ``k`` in the background unless it is there, queued or was decoded before (a
        prefetch that runs late must not decode again a file the reader has read and left behind);
        errors surface on ``get``."""
        with self._lock:
            if k in self._entries or k in self._asked:
                return
            self._asked.add(k)
        self._ahead.submit(self._quiet_get, k)

    def close(self) -> None:
        self._ahead.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            self._entries.clear()
            self._sizes.clear()

    # -- plumbing ------------------------------------------------------------------------------

    def _quiet_get(self, k: int) -> None:
        with self._lock:
            if k in self._seen:
                return
        try:
            self.get(k)
        except BaseException:  # noqa: BLE001 - the reader that needs the file gets the error itself
            pass

    def _evict(self, newest: int) -> None:
        """Drop the least recently used decoded files beyond the budget (never one still decoding)."""
        held = sum(self._sizes.values())
        self.peak_bytes = max(self.peak_bytes, held)
        for k in list(self._entries):
            if held <= self.budget_bytes or len(self._entries) <= self.keep:
                break
            if k == newest or k not in self._sizes:
                continue
            del self._entries[k]
            held -= self._sizes.pop(k)
