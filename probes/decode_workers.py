"""Decode /generate answers in worker processes, so parsing overlaps the transfer of the next answers.

In one process the decode holds the GIL for as long as simdjson parses (~60 ms for a 42 MB answer),
and the thread reading the next answer off the socket waits for it: transfer and decode take turns
(benchmarks/sglang_capture_throughput.py measures both ways). A worker process parses under its own
GIL while the asking thread waits without one, and more cores decode more answers at once.

A worker is ``python -m alignprobe.probes.decode_workers``, a fresh interpreter (not a fork of
this process, which runs threads; not multiprocessing, which would import the caller's main script
again). An answer travels through memory both sides map (files under /dev/shm, unlinked at once and
handed over as open descriptors, so a killed capture leaves nothing behind): the JSON in, the float32
rows out, one copy each way; a line on the worker's stdin and one on its stdout say what is there.
The worker runs :func:`decode_generate`, so the answer is the one this process would decode, bit
for bit. A worker that is gone (killed, or its start failed) is not replaced: answers are then
decoded here.
"""

from __future__ import annotations

import mmap
import os
import queue
import select
import subprocess
import sys
import tempfile
import threading
from typing import Any

import msgspec
import numpy as np

from alignprobe.probes.sglang_decode import NotAnAnswer, decode_generate

# Below this an answer is decoded in the asking thread: the round trip would cost more than it saves.
MIN_WORKER_BYTES = 1 << 20
_POLL_S = 0.5  # how often a thread waiting for a free worker looks whether any is left


def worker_count(in_flight: int, cores: int | None = None) -> int:
    """As many workers as requests in flight can keep busy, leaving two cores to the transfer and the
    writer (and a loopback server). On 2 cores, none: there a worker's copies cost more than the
    overlap gains (benchmarks/README.md, the SGLang capture section)."""
    cores = cores or os.cpu_count() or 1
    return max(0, min(in_flight, cores - 2))


class DecodeWorkers:
    """``decode(content)`` is :func:`decode_generate` in one of ``count`` worker processes, started
    on the first large answer; any thread may call it, and waits for a free worker."""

    def __init__(self, count: int):
        self.count = count  # asked for; fewer may start (or none: then every answer is decoded here)
        self._alive = 0
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._lock = threading.Lock()
        self._started = False

    def decode(self, content: bytes) -> Any:
        if len(content) < MIN_WORKER_BYTES or not self._start():
            return decode_generate(content)
        while True:
            try:
                worker = self._idle.get(timeout=_POLL_S)
                break
            except queue.Empty:
                if not self._alive:
                    return decode_generate(content)
        try:
            # A worker still importing (~1 s after its start) leaves this answer to be decoded here.
            answer = worker.decode(content) if worker.ready() else None
        except OSError:  # the worker died: decode this answer here, go on with the others
            with self._lock:
                self._alive -= 1
            worker.close()
            return decode_generate(content)
        except BaseException:
            self._idle.put(worker)
            raise
        self._idle.put(worker)
        return decode_generate(content) if answer is None else answer

    def close(self) -> None:
        with self._lock:
            self._started = True  # none start after this
            alive, self._alive = self._alive, 0
        for _ in range(alive):
            self._idle.get().close()

    def _start(self) -> bool:
        with self._lock:
            if not self._started:
                self._started = True
                for _ in range(self.count):
                    try:
                        self._idle.put(_Worker())
                        self._alive += 1
                    except OSError:  # no processes or no shared memory here: decode in this process
                        break
            return self._alive > 0


def worker_env() -> dict[str, str]:
    """A worker's environment: this process's import path, and not the working directory first (``-m``
    puts it there, and a source checkout there, an alignprobe/ without its probes, would shadow the
    package this process imported; PYTHONSAFEPATH, Python 3.11+)."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, sys.path)), "PYTHONSAFEPATH": "1"}


class _Worker:
    """One process and the two files it shares with this one (JSON in, rows out)."""

    def __init__(self):
        self._json = _Shared()
        self._rows = _Shared()
        fds = (self._json.fd, self._rows.fd)
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-m", __name__, *map(str, fds)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                pass_fds=fds, env=worker_env(),
                start_new_session=True)  # Ctrl-C is the capture's to handle (one line): the worker ends at EOF
        except OSError:
            self._json.close()
            self._rows.close()
            raise
        self._ready = False

    def ready(self) -> bool:
        """Whether the worker has said it is up (its imports done), without waiting for it."""
        if not self._ready and select.select([self._process.stdout], [], [], 0)[0]:
            if self._process.stdout.readline() != b"ready\n":
                raise OSError("the decode worker did not start")
            self._ready = True
        return self._ready

    def decode(self, content: bytes) -> Any:
        size = len(content)
        self._json.fit(size)
        self._json.view()[:size] = content
        kind, detail, cached_tokens = self._ask([size])
        if kind == "not an answer":
            raise NotAnAnswer(detail)
        if kind == "no room":
            raise OSError(detail)  # shared memory is full: this answer, and the next, are decoded here

        states = detail
        if kind == "rows":
            shape = tuple(detail)
            count = int(np.prod(shape))
            self._rows.follow()  # the worker grew the file to the rows' size
            rows = np.frombuffer(self._rows.view(), dtype=np.float32, count=count) if count else np.empty(0, np.float32)
            states = [rows.reshape(shape).copy()]
        return {"meta_info": {"hidden_states": states, "cached_tokens": cached_tokens}}

    def close(self) -> None:
        for pipe in (self._process.stdin, self._process.stdout):
            try:
                pipe.close()  # the worker reads the end of its stdin: it exits
            except OSError:
                pass
        try:
            self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._json.close()
        self._rows.close()

    def _ask(self, message: list) -> list:
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write(msgspec.json.encode(message) + b"\n")
        self._process.stdin.flush()
        line = self._process.stdout.readline()  # waits without the GIL while the worker decodes
        if not line:
            raise OSError("the decode worker exited")
        return msgspec.json.decode(line)


class _Shared:
    """A file in shared memory, unlinked at once, mapped whole here; the worker gets its descriptor."""

    def __init__(self, fd: int | None = None):
        if fd is None:  # a new file (the parent); a worker passes the descriptor it was given
            folder = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
            fd, path = tempfile.mkstemp(prefix="alignprobe-decode-", dir=folder)
            os.unlink(path)
        self.fd = fd
        self.capacity = 0
        self._map: mmap.mmap | None = None

    def fit(self, size: int) -> None:
        """Room for ``size`` bytes, reserved (OSError when shared memory is full: an mmap write past
        what tmpfs holds would kill the process with SIGBUS instead)."""
        if size > self.capacity:
            os.posix_fallocate(self.fd, 0, max(size, 2 * self.capacity))
            self.follow()

    def follow(self) -> None:
        """Map the file whole again if it grew (here, or in the worker)."""
        size = os.fstat(self.fd).st_size
        if size > self.capacity:
            if self._map is not None:
                self._map.close()
            self.capacity = size
            self._map = mmap.mmap(self.fd, size)

    def view(self) -> mmap.mmap:
        assert self._map is not None, "fit() first"
        return self._map

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None
        os.close(self.fd)


def _serve(json_fd: int, rows_fd: int) -> None:
    """The worker: decode each answer the parent puts in the JSON file, its rows into the rows file."""
    rows = _Shared(rows_fd)
    sys.stdout.buffer.write(b"ready\n")
    sys.stdout.buffer.flush()
    for line in sys.stdin.buffer:
        (size,) = msgspec.json.decode(line)
        # Mapped at the answer's own size: the decoder reads the whole buffer it is given.
        content = mmap.mmap(json_fd, size, access=mmap.ACCESS_READ)
        try:
            reply = _decoded(content)
        finally:
            _release(content)
        if reply[0] == "rows":
            values = reply[1]
            try:
                rows.fit(values.nbytes)
            except OSError as exc:
                reply = ["no room", f"shared memory is full ({exc})", None]
            else:
                if values.size:
                    np.frombuffer(rows.view(), dtype=np.float32, count=values.size)[:] = values.ravel()
                reply[1] = values.shape
        sys.stdout.buffer.write(msgspec.json.encode(reply) + b"\n")
        sys.stdout.buffer.flush()


def _decoded(content: mmap.mmap) -> list:
    try:
        answer = decode_generate(content)  # type: ignore[arg-type]  # a buffer: find, slices, memoryview
    except NotAnAnswer as exc:
        return ["not an answer", str(exc), None]
    meta = answer["meta_info"]
    states = meta["hidden_states"]
    if not states or states[0] is None:
        return ["as is", states, meta["cached_tokens"]]
    return ["rows", states[0], meta["cached_tokens"]]


def _release(content: mmap.mmap) -> None:
    try:
        content.close()
    except BufferError:  # a view of it outlives the decode (a traceback): the collector unmaps it
        pass


if __name__ == "__main__":
    _serve(int(sys.argv[1]), int(sys.argv[2]))
