"""Copy captured hidden states to host memory without stalling the forward pass.

A naive capture calls ``.cpu()`` on every state after a forward: each call waits for the GPU and
copies into pageable memory, which the driver stages through a bounce buffer, and the next forward
starts only after the last copy. :class:`StateOffloader` overlaps the copies with the next forward:

- after the forward that produced the states it records an event on the compute stream;
- a side CUDA stream waits for that event and copies each state into pinned host memory
  (``non_blocking``: the copy engine runs while the GPU computes the next batch);
- the copies of a batch are enqueued at the *next* ``submit`` (or at ``drain``), once the caller
  has launched the next forward. A transformers forward reads a flag back from the GPU while it
  builds its attention mask (``attention_mask.all()``, or the packed-sequence check when there is
  no mask): that small device-to-host copy queues behind any big copy already on the copy engine,
  so a batch's copies enqueued at once held the next forward's launch for their whole duration and
  the copies did not overlap at all (H200: offload 17% slower than the forward, the same as
  copying in turn; benchmarks/README.md). Enqueued after the launch, they run beside it;
- ``record_stream`` tells the caching allocator that the side stream uses the device tensors, so
  the caller may drop them at once and their memory is not handed out before the copy is done;
- a background thread waits for each copy's event and hands the host tensors to the sink in
  submission order, so the sink (e.g. a dump writer) never blocks the loop that runs the model.

Submitted device tensors must not be written afterwards (a forward's outputs never are): the
copy reads them later, on another stream.

At most ``max_in_flight`` batches wait for the sink besides the one it is handling (and the last
submitted batch's device tensors are held until the next submit): device and pinned memory stay bounded, and a sink slower than the model slows the loop down instead of filling memory.
For CPU tensors there is nothing to overlap: they are cloned and handed over the same way, so a
caller has one code path on every device.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Callable, Mapping

import torch

from alignprobe.errors import AlignprobeError

# The sink receives what submit() was given: the caller's key (e.g. the batch's sample ids) and
# the states as host tensors. The tensors are the sink's to keep: they are never written again.
Sink = Callable[[Any, dict[str, torch.Tensor]], None]

_STOP = object()


class StateOffloader:
    """Hand device states to ``sink`` on a background thread, copied to host memory off the compute stream.

    >>> with StateOffloader(lambda ids, states: writer_add(ids, states)) as off:
    ...     for ids, batch in batches:
    ...         out = model(batch, output_hidden_states=True)
    ...         off.submit(ids, {"final": out.hidden_states[-1]})
    ... # leaving the block waits until the sink has seen every batch

    An exception raised by the sink is re-raised by the next ``submit``, ``drain`` or ``close``.
    """

    def __init__(self, sink: Sink, *, max_in_flight: int = 2):
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")
        self._sink = sink
        self._queue: queue.Queue = queue.Queue(maxsize=max_in_flight)
        self._streams: dict[torch.device, torch.cuda.Stream] = {}
        self._deferred: tuple | None = None  # the last CUDA batch, copied at the next submit or drain
        self._error: BaseException | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._hand_over, name="alignprobe-offload", daemon=True)
        self._thread.start()

    # -- public --------------------------------------------------------------------------------

    def submit(self, sample_ids: Any, tensors: Mapping[str, torch.Tensor]) -> None:
        """Queue a copy of ``tensors`` to the host; ``sample_ids`` is passed to the sink unchanged.

        Returns at once for device tensors (their copy is enqueued at the next submit or drain);
        blocks while ``max_in_flight`` earlier batches wait behind the one the sink is handling.
        """
        self._raise_if_failed()
        if self._closed:
            raise RuntimeError("submit() after close()")
        devices = {t.device for t in tensors.values()}
        cuda = [d for d in devices if d.type == "cuda"]
        if len(cuda) > 1 or (cuda and len(devices) > 1):
            raise ValueError(f"one submit() takes tensors of one device, got {sorted(map(str, devices))}")
        if cuda:
            ready = torch.cuda.Event()
            ready.record(torch.cuda.current_stream(cuda[0]))
            batch = (sample_ids, cuda[0], {name: t.detach() for name, t in tensors.items()}, ready)
            self._copy_deferred()  # the previous batch: its forward's successor is launched by now
            self._deferred = batch
        else:
            self._copy_deferred()  # keep submission order
            host = {name: t.detach().to("cpu", copy=True) for name, t in tensors.items()}
            self._queue.put((sample_ids, host, None))
        self._raise_if_failed()

    def drain(self) -> None:
        """Wait until the sink has received every submitted batch; re-raise the sink's error, if any."""
        self._copy_deferred()
        self._queue.join()
        self._raise_if_failed()

    def close(self) -> None:
        """Drain, then stop the background thread."""
        if self._closed:
            return
        try:
            self.drain()
        finally:
            self._closed = True
            self._queue.put(_STOP)
            self._thread.join()

    def __enter__(self) -> "StateOffloader":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            # Already failing: stop quietly, keeping the caller's exception the one that surfaces.
            try:
                self.close()
            except Exception:
                pass

    # -- plumbing ------------------------------------------------------------------------------

    def _copy_deferred(self) -> None:
        if self._deferred is None:
            return
        (sample_ids, device, tensors, ready), self._deferred = self._deferred, None
        host, done = self._copy_from_cuda(device, tensors, ready)
        self._queue.put((sample_ids, host, done))

    def _copy_from_cuda(self, device: torch.device, tensors: Mapping[str, torch.Tensor], ready: torch.cuda.Event):
        side = self._streams.get(device)
        if side is None:
            side = self._streams[device] = torch.cuda.Stream(device=device)
        side.wait_event(ready)
        host = {}
        with torch.cuda.stream(side):
            for name, t in tensors.items():
                h = self._host_buffer(name, t)
                h.copy_(t, non_blocking=True)
                t.record_stream(side)
                host[name] = h
        done = torch.cuda.Event()
        done.record(side)
        return host, done

    def _host_buffer(self, name: str, t: torch.Tensor) -> torch.Tensor:
        """Pinned host memory for a copy of ``t``.

        From torch's caching pinned allocator: a tensor the sink drops goes back to the cache and is
        reused once its copy has finished, so steady state allocates nothing.
        """
        return torch.empty(t.shape, dtype=t.dtype, pin_memory=True)

    def _hand_over(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is _STOP:
                    return
                sample_ids, host, done = item
                if self._error is None:  # after a failure, batches are dropped so submit() never blocks
                    if done is not None:
                        done.synchronize()  # releases the GIL while the copy engine works
                    self._sink(sample_ids, host)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
                self._error = exc
            finally:
                self._queue.task_done()

    def _raise_if_failed(self) -> None:
        # Sticky: once the sink failed, every later call says so (the dump is missing batches).
        if self._error is not None:
            if isinstance(self._error, (AlignprobeError, OSError)):  # the user's or the machine's: as it is
                raise self._error
            raise RuntimeError(f"the offload sink failed: {self._error}") from self._error
