"""Write a dump whose samples are known before the capture starts: in place, with no merge.

``DumpWriter`` writes shards and merges them at the end, so every byte is written twice and the
merge runs after the capture (benchmarks/README.md, section 3: it made ``capture_hf`` writer-bound).
When every sample id and length is known up front (``capture_hf`` tokenizes all prompts first), the
final file can be laid out at once instead:

- ``<path>.partial/dump.h5`` is created with every dataset contiguous and allocated (never filled),
  then closed: its HDF5 metadata is complete and is never open for writing during the capture;
- samples are written straight to their file offsets, from the caller's memory (no copy): ``add``
  takes one sample, ``add_batch`` a padded batch, whose samples adjacent in the plan go out as one
  ``os.pwritev`` per stream (its buffers the samples' rows); the streams are written in parallel
  (pwritev releases the GIL);
- ``flush()`` fsyncs the data, then appends the ids it made durable to ``journal`` (one JSON string
  a line) and fsyncs that: a sample is done exactly when its journal line is whole, so a process
  killed at any moment (kill -9) resumes from the journal, rewriting at most the samples after it;
- ``finish()`` sets ``complete``, and renames the file into place.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import shutil
from typing import TYPE_CHECKING, Mapping, Sequence

import h5py
import numpy as np

from alignprobe.dump.encoding import to_storage
from alignprobe.dump.layout import create_file
from alignprobe.dump.reader import PARTIAL_SUFFIX
from alignprobe.dump.room import check_room, dump_bytes
from alignprobe.dump.write_behind import start_write_out
from alignprobe.dump.schema import Provenance, StreamClaim
from alignprobe.dump.writer import (
    DEFAULT_SHARD_TOKENS,
    MANIFEST,
    FinishOnExit,
    claim_partial,
    token_array,
)
from alignprobe.errors import BadInput
from alignprobe.safe_paths import replace_atomically

if TYPE_CHECKING:
    import torch

DATA = "dump.h5"
JOURNAL = "journal"
WRITE_THREADS = 4
try:
    IOV_MAX = max(16, os.sysconf("SC_IOV_MAX"))  # buffers one pwritev takes (Linux, macOS: 1024)
except (ValueError, OSError, AttributeError):
    IOV_MAX = 16  # the POSIX minimum


class PlannedDumpWriter(FinishOnExit):
    """Like :class:`DumpWriter` (same ``add`` / ``flush`` / ``finish`` / ``done_ids`` / ``with``), for a
    capture whose ``plan`` — ``(sample_id, length)`` of every sample, in dump order — is known.

    ``flush_tokens``: tokens written between two flushes (what a crash can cost). ``write_behind``:
    queue each write's pages for the disk at once (write_behind.py), for a writer that flushes rarely.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        provenance: Provenance,
        streams: Mapping[str, StreamClaim],
        plan: Sequence[tuple[str, int]],
        *,
        resume: bool = False,
        overwrite: bool = False,
        flush_tokens: int = DEFAULT_SHARD_TOKENS,
        write_behind: bool = False,
    ):
        self.path = os.fspath(path)
        self.write_behind = write_behind
        self.partial_dir = self.path + PARTIAL_SUFFIX
        self.streams = dict(streams)
        self.flush_tokens = flush_tokens
        ids = [str(sid) for sid, _ in plan]
        lengths = np.asarray([int(n) for _, n in plan], dtype=np.int64)
        if not ids:
            raise BadInput(f"{self.path}: no samples to capture, so no dump was written")
        if len(set(ids)) != len(ids):
            raise ValueError("sample ids in the plan must be unique")
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        self._rows = {sid: (int(offsets[i]), int(lengths[i])) for i, sid in enumerate(ids)}
        manifest = json.dumps(
            {"streams": {n: c.__dict__ for n, c in self.streams.items()}, "plan": [ids, lengths.tolist()]},
            sort_keys=True,
            default=list,
        )
        data = os.path.join(self.partial_dir, DATA)
        self.done_ids: set[str] = set()
        if not (resume and os.path.isfile(data)):  # a new file: it must fit before a byte is written
            # (create_file checks again; here it is before the .partial folder exists, so nothing is left)
            check_room(os.path.dirname(os.path.abspath(self.path)), dump_bytes(self.streams, offsets[-1]), self.path)
        if claim_partial(self.path, manifest, resume=resume, overwrite=overwrite, settings="prompts, streams or layers"):
            if not os.path.isfile(data):
                raise BadInput(f"{self.partial_dir}/ has no {DATA}: delete the folder to start over")
            self.done_ids = self._read_journal()
        else:
            with create_file(data, provenance, self.streams, ids, offsets, preallocated=True):
                pass
            replace_atomically(os.path.join(self.partial_dir, MANIFEST), manifest)
        with h5py.File(data, "r") as f:
            self._places = {"tokens": (f["tokens"].id.get_offset(), 8)}
            for name in self.streams:
                ds = f[f"streams/{name}"]
                self._places[name] = (ds.id.get_offset(), ds.shape[1] * ds.dtype.itemsize)
        self._fd: int | None = os.open(data, os.O_RDWR)  # None once closed
        self._journal = open(os.path.join(self.partial_dir, JOURNAL), "a")
        self._pool = concurrent.futures.ThreadPoolExecutor(WRITE_THREADS)
        self._unflushed: list[str] = []
        self._unflushed_tokens = 0

    # -- public --------------------------------------------------------------------------------

    def add(self, sample_id: str, token_ids, states: Mapping[str, "torch.Tensor | np.ndarray"]) -> None:
        """Write one planned sample: token ids ``[S]`` and, for every stream, states ``[S, width]``."""
        self.add_batch([sample_id], [token_ids], {name: s[None] for name, s in states.items()})

    def add_batch(
        self,
        sample_ids: Sequence[str],
        token_ids: Sequence,
        states: Mapping[str, "torch.Tensor | np.ndarray"],
        spans: Sequence[tuple[int, int]] | None = None,
    ) -> None:
        """Write a padded batch of planned samples from where it lies, without copying it.

        ``states[name]`` is ``[batch, columns, width]``: sample ``i`` is row ``i``, columns
        ``spans[i] = (first, stop)`` (default ``(0, len(token_ids[i]))``, right padding). A CPU tensor
        or array already in the stream's dtype is written as it is (another is converted first: a
        copy). Samples adjacent in the plan are written together, one ``os.pwritev`` per stream whose
        buffers are their rows, so a batch captured in plan order costs one call per stream.
        Returns once every byte is in the file: the caller may then reuse its buffers.
        """
        sample_ids = [str(sid) for sid in sample_ids]
        if not sample_ids:
            return
        spans = [(0, len(t)) for t in token_ids] if spans is None else [(int(a), int(b)) for a, b in spans]
        if not len(sample_ids) == len(token_ids) == len(spans):
            raise ValueError(f"a batch of {len(sample_ids)} sample ids has {len(token_ids)} token id lists and "
                             f"{len(spans)} spans")
        if len(set(sample_ids)) != len(sample_ids):
            raise ValueError("sample ids in a batch must be unique")
        samples = []  # (file row, batch row, first, stop, token ids)
        for i, (sid, (first, stop)) in enumerate(zip(sample_ids, spans)):
            ids = token_array(sid, token_ids[i])
            if first < 0 or stop - first != len(ids):
                raise ValueError(f"sample {sid!r} has {len(ids)} token ids but spans columns {first}:{stop}")
            samples.append((self._planned(sid, len(ids)), i, first, stop, ids))
        if set(states) != set(self.streams):
            raise ValueError(f"the batch has streams {sorted(states)}, expected {sorted(self.streams)}")
        columns = max(stop for _, _, _, stop, _ in samples)
        stored = {}
        for name, claim in self.streams.items():
            shape = tuple(states[name].shape)
            if len(shape) != 3 or shape[0] != len(samples) or shape[1] < columns or shape[2] != claim.width:
                raise ValueError(f"stream {name!r} of the batch has shape {shape}, expected "
                                 f"({len(samples)}, >= {columns}, {claim.width})")
            stored[name] = to_storage(states[name], claim.dtype)  # a view of a CPU tensor of that dtype
        runs: list[tuple[int, dict[str, list[np.ndarray]]]] = []  # (first file row, each stream's parts)
        next_row = None
        for row, i, first, stop, ids in sorted(samples, key=lambda s: s[0]):
            if row != next_row:
                runs.append((row, {"tokens": [], **{name: [] for name in stored}}))
            parts = runs[-1][1]
            parts["tokens"].append(ids)
            for name, a in stored.items():
                parts[name].append(a[i, first:stop])
            next_row = row + len(ids)
        self._write(runs)
        self._done(sample_ids, sum(len(ids) for *_, ids in samples))

    def flush(self) -> None:
        """Make the samples added so far durable: data first, then their journal lines."""
        if not self._unflushed:
            return
        assert self._fd is not None, "flushed after finish() or abandon()"
        os.fsync(self._fd)
        self._journal.write("".join(json.dumps(sid) + "\n" for sid in self._unflushed))
        self._journal.flush()
        os.fsync(self._journal.fileno())
        self._unflushed, self._unflushed_tokens = [], 0

    def finish(self) -> str:
        """Mark the dump complete and move it into place; every planned sample must have been added."""
        self.flush()
        self._close()
        missing = [sid for sid in self._rows if sid not in self.done_ids]
        if missing:
            raise BadInput(
                f"{self.path}: {len(missing)} planned samples were not captured (e.g. {missing[0]!r}); "
                "rerun with --resume to capture them"
            )
        data = os.path.join(self.partial_dir, DATA)
        with h5py.File(data, "r+") as f:
            f.attrs["complete"] = True
        os.replace(data, self.path)
        shutil.rmtree(self.partial_dir)
        return self.path

    def abandon(self) -> None:
        """Keep what was added, durable, for a later resume."""
        try:
            self.flush()
        finally:
            self._close()

    # -- plumbing ------------------------------------------------------------------------------

    def _planned(self, sample_id: str, length: int) -> int:
        """The first file row of a sample of ``length`` tokens that the plan holds and nobody wrote yet."""
        if sample_id not in self._rows:
            raise ValueError(f"sample {sample_id!r} is not in the plan")
        if sample_id in self.done_ids:
            raise ValueError(f"sample {sample_id!r} was already written")
        first, planned = self._rows[sample_id]
        if length != planned:
            raise ValueError(f"sample {sample_id!r} has {length} token ids, the plan says {planned}")
        return first

    def _write(self, runs: Sequence[tuple[int, Mapping[str, Sequence[np.ndarray]]]]) -> None:
        """Each run: from its first file row on, every stream's (and the tokens') parts back to back.

        One ``pwritev`` per run and stream, on the pool; returns when all of them have (the caller's
        buffers are read until then, and not after).
        """
        assert self._fd is not None, "written after finish() or abandon()"
        writes = []
        for row, parts in runs:
            for name, arrays in parts.items():
                place, row_bytes = self._places[name]
                buffers = [np.ascontiguousarray(a).data.cast("B") for a in arrays]
                write = _write_then_queue if self.write_behind else pwrite_all
                writes.append(self._pool.submit(write, self._fd, buffers, place + row * row_bytes))
        concurrent.futures.wait(writes)
        for w in writes:
            w.result()

    def _done(self, sample_ids: Sequence[str], tokens: int) -> None:
        self.done_ids.update(sample_ids)
        self._unflushed += sample_ids
        self._unflushed_tokens += tokens
        if self._unflushed_tokens >= self.flush_tokens:
            self.flush()

    def _read_journal(self) -> set[str]:
        """Ids of the samples made durable; a last line cut off by a crash is dropped from the file."""
        path = os.path.join(self.partial_dir, JOURNAL)
        try:
            with open(path, "rb") as fh:
                text = fh.read()
        except FileNotFoundError:
            return set()
        whole = text[: text.rfind(b"\n") + 1]
        if len(whole) != len(text):
            os.truncate(path, len(whole))
        return {json.loads(line) for line in whole.decode().splitlines()} & set(self._rows)

    def _close(self) -> None:
        if self._fd is None:
            return
        self._pool.shutdown()
        os.close(self._fd)
        self._journal.close()
        self._fd = None


def _write_then_queue(fd: int, buffers: Sequence[memoryview], offset: int) -> None:
    """:func:`pwrite_all`, then the written range queued for the disk without waiting (write_behind.py)."""
    pwrite_all(fd, buffers, offset)
    start_write_out(fd, offset, sum(len(b) for b in buffers))


def pwrite_all(fd: int, buffers: Sequence[memoryview], offset: int) -> None:
    """Write byte ``buffers`` back to back at ``offset`` with ``os.pwritev``, until every byte is written.

    One call takes at most IOV_MAX buffers, and may write less than asked (Linux writes at most
    2 GiB a call): the rest goes in the next call.
    """
    buffers = [b for b in buffers if len(b)]
    i = 0
    while i < len(buffers):
        written = os.pwritev(fd, buffers[i : i + IOV_MAX], offset)
        if written <= 0:
            raise OSError(f"pwritev wrote nothing at offset {offset}")
        offset += written
        while i < len(buffers) and written >= len(buffers[i]):
            written -= len(buffers[i])
            i += 1
        if written:
            buffers[i] = buffers[i][written:]
