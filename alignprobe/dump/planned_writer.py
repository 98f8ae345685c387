"""Write a dump whose samples are known before the capture starts: in place, with no merge.

``DumpWriter`` writes shards and merges them at the end, so every byte is written twice and the
merge runs after the capture (benchmarks/README.md, section 3: it made ``capture_hf`` writer-bound).
When every sample id and length is known up front (``capture_hf`` tokenizes all prompts first), the
final file can be laid out at once instead:

- ``<path>.partial/dump.h5`` is created with every dataset contiguous and allocated (never filled),
  then closed: its HDF5 metadata is complete and is never open for writing during the capture;
- each sample's tokens and states are written with ``os.pwrite`` straight to their file offsets,
  the streams of a sample in parallel (pwrite releases the GIL);
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

from alignprobe.dump.layout import create_file
from alignprobe.dump.reader import PARTIAL_SUFFIX
from alignprobe.dump.schema import Provenance, StreamClaim
from alignprobe.dump.writer import DEFAULT_SHARD_TOKENS, MANIFEST, atomic_write_text, claim_partial, stored_sample
from alignprobe.errors import BadInput

if TYPE_CHECKING:
    import torch

DATA = "dump.h5"
JOURNAL = "journal"
WRITE_THREADS = 4


class PlannedDumpWriter:
    """Like :class:`DumpWriter` (same ``add`` / ``flush`` / ``finish`` / ``done_ids`` / ``with``), for a
    capture whose ``plan`` — ``(sample_id, length)`` of every sample, in dump order — is known.

    ``flush_tokens``: tokens written between two flushes (what a crash can cost).
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
    ):
        self.path = os.fspath(path)
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
        if claim_partial(self.path, manifest, resume=resume, overwrite=overwrite, settings="prompts, streams or layers"):
            if not os.path.isfile(data):
                raise BadInput(f"{self.partial_dir}/ has no {DATA}: delete the folder to start over")
            self.done_ids = self._read_journal()
        else:
            with create_file(data, provenance, self.streams, ids, offsets, preallocated=True):
                pass
            atomic_write_text(os.path.join(self.partial_dir, MANIFEST), manifest)
        with h5py.File(data, "r") as f:
            self._places = {"tokens": (f["tokens"].id.get_offset(), 8)}
            for name in self.streams:
                ds = f[f"streams/{name}"]
                self._places[name] = (ds.id.get_offset(), ds.shape[1] * ds.dtype.itemsize)
        self._fd = os.open(data, os.O_RDWR)
        self._journal = open(os.path.join(self.partial_dir, JOURNAL), "a")
        self._pool = concurrent.futures.ThreadPoolExecutor(WRITE_THREADS)
        self._unflushed: list[str] = []
        self._unflushed_tokens = 0

    # -- public --------------------------------------------------------------------------------

    def add(self, sample_id: str, token_ids, states: Mapping[str, "torch.Tensor | np.ndarray"]) -> None:
        """Write one planned sample: token ids ``[S]`` and, for every stream, states ``[S, width]``."""
        sample_id = str(sample_id)
        if sample_id not in self._rows:
            raise ValueError(f"sample {sample_id!r} is not in the plan")
        if sample_id in self.done_ids:
            raise ValueError(f"sample {sample_id!r} was already written")
        first, length = self._rows[sample_id]
        if len(token_ids) != length:
            raise ValueError(f"sample {sample_id!r} has {len(token_ids)} token ids, the plan says {length}")
        ids, stored = stored_sample(sample_id, token_ids, states, self.streams)
        arrays = {"tokens": ids, **stored}
        writes = [
            self._pool.submit(os.pwrite, self._fd, memoryview(np.ascontiguousarray(a)).cast("B"),
                              self._places[name][0] + first * self._places[name][1])
            for name, a in arrays.items()
        ]
        for w in writes:
            w.result()
        self.done_ids.add(sample_id)
        self._unflushed.append(sample_id)
        self._unflushed_tokens += length
        if self._unflushed_tokens >= self.flush_tokens:
            self.flush()

    def flush(self) -> None:
        """Make the samples added so far durable: data first, then their journal lines."""
        if not self._unflushed:
            return
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

    def __enter__(self) -> "PlannedDumpWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.finish()
        else:
            self.abandon()

    # -- plumbing ------------------------------------------------------------------------------

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
