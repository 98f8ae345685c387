"""Write a dump atomically, with resume.

A capture is written as shards into ``<path>.partial/``: each shard is a complete small dump that
appears under its final name by an atomic rename, so a process killed at any instant (kill -9)
loses at most the shard in flight. ``finish()`` merges the shards into ``<path>`` (again by rename)
and removes the partial folder. A dump that exists under its final name is therefore complete,
and a ``.partial/`` folder is clearly an unfinished capture that ``resume=True`` continues.
"""

from __future__ import annotations

import concurrent.futures
import glob
import json
import os
import shutil
from typing import TYPE_CHECKING, Mapping

import numpy as np

from alignprobe.dump.encoding import is_tensor, to_storage
from alignprobe.dump.layout import create_file
from alignprobe.dump.marks import SampleMark, whole, write_marks
from alignprobe.dump.reader import PARTIAL_SUFFIX, Dump
from alignprobe.dump.schema import Provenance, StreamClaim
from alignprobe.errors import BadInput
from alignprobe.safe_paths import replace_atomically

if TYPE_CHECKING:
    import torch

MANIFEST = "manifest.json"
# Tokens buffered before a shard is written. A shard is also the unit lost to a crash.
DEFAULT_SHARD_TOKENS = 16384
# Tokens copied at once when shards are merged: bounds the memory of finish().
MERGE_BLOCK_BYTES = 64 << 20


class FinishOnExit:
    """A writer's ``with``: :meth:`finish` on a clean exit, :meth:`abandon` (keep what is durable,
    for a resume) when the block raised."""

    def __enter__(self):
        return self

    def finish(self) -> str:
        """Write the dump out; its path."""
        raise NotImplementedError

    def abandon(self) -> None:
        """Close, keeping what is durable for a resume."""
        raise NotImplementedError

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.finish()
        else:
            self.abandon()


class DumpWriter(FinishOnExit):
    """Collect samples and write them as one dump.

    >>> with DumpWriter("train.h5", Provenance.here(engine="transformers"), streams) as w:
    ...     for sid, ids, states in samples:
    ...         if sid not in w.done_ids:
    ...             w.add(sid, ids, states)

    Leaving the ``with`` block normally finishes the dump; leaving it by an exception writes the
    samples already added as a shard and keeps the partial folder for ``resume=True``.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        provenance: Provenance,
        streams: Mapping[str, StreamClaim],
        *,
        resume: bool = False,
        overwrite: bool = False,
        shard_tokens: int = DEFAULT_SHARD_TOKENS,
        background: bool = False,
    ):
        self.path = os.fspath(path)
        self.partial_dir = self.path + PARTIAL_SUFFIX
        self.provenance = provenance
        self.streams = dict(streams)
        self.shard_tokens = shard_tokens
        if not self.streams:
            raise ValueError("a dump needs at least one stream")
        self.done_ids: set[str] = set()
        self._shards: list[str] = []
        manifest = json.dumps({n: c.__dict__ for n, c in self.streams.items()}, sort_keys=True, default=list)
        if claim_partial(self.path, manifest, resume=resume, overwrite=overwrite, settings="streams or layers"):
            self._load_shards()
        else:
            replace_atomically(os.path.join(self.partial_dir, MANIFEST), manifest)
        self._buffer: list[tuple[str, np.ndarray, dict[str, np.ndarray], SampleMark | None]] = []
        self._buffered_tokens = 0
        self._pool = concurrent.futures.ThreadPoolExecutor(1) if background else None
        self._pending: list[concurrent.futures.Future] = []

    # -- public --------------------------------------------------------------------------------

    def add(self, sample_id: str, token_ids, states: Mapping[str, "torch.Tensor | np.ndarray"],
            mark: SampleMark | None = None) -> None:
        """Add one sample: its token ids ``[S]`` and, for every stream, states ``[S, width]``.

        ``mark``: what was wrong with the sample as the engine returned it (dump/marks.py), if anything.
        """
        sample_id = str(sample_id)
        if sample_id in self.done_ids:
            raise ValueError(f"sample {sample_id!r} was already written")
        ids, stored = stored_sample(sample_id, token_ids, states, self.streams)
        if mark is not None and mark.length != len(ids):
            raise ValueError(f"the mark of {sample_id!r} is for {mark.length} tokens, the sample has {len(ids)}")
        self._buffer.append((sample_id, ids, stored, mark))
        self.done_ids.add(sample_id)
        self._buffered_tokens += len(ids)
        if self._buffered_tokens >= self.shard_tokens:
            self.flush()

    def flush(self) -> None:
        """Write the buffered samples as one shard (in the background when so constructed)."""
        if not self._buffer:
            return
        buffer, self._buffer, self._buffered_tokens = self._buffer, [], 0
        shard = os.path.join(self.partial_dir, f"shard-{len(self._shards):06d}.h5")
        self._shards.append(shard)
        if self._pool is None:
            _write_shard(shard, self.provenance, self.streams, buffer)
        else:
            # At most one shard waits behind the one being written: memory stays bounded.
            while len(self._pending) >= 2:
                self._pending.pop(0).result()
            self._pending.append(self._pool.submit(_write_shard, shard, self.provenance, self.streams, buffer))

    def finish(self) -> str:
        """Merge the shards into the final dump; returns its path."""
        self.flush()
        self._drain()
        if not self._shards:
            raise BadInput(f"{self.path}: no samples were captured, so no dump was written")
        merged = os.path.join(self.partial_dir, "merged.h5")
        _merge(self._shards, merged, self.provenance, self.streams)
        os.replace(merged, self.path)
        shutil.rmtree(self.partial_dir)
        return self.path

    def abandon(self) -> None:
        """Keep what was added as a shard, leaving the partial folder for a later resume."""
        try:
            self.flush()
        finally:
            self._drain()

    # -- resume --------------------------------------------------------------------------------

    def _load_shards(self) -> None:
        for leftover in glob.glob(os.path.join(self.partial_dir, "*.tmp")):
            os.remove(leftover)  # a shard cut off mid-write: never renamed, so never counted
        self._shards = sorted(glob.glob(os.path.join(self.partial_dir, "shard-*.h5")))
        for shard in self._shards:
            with Dump(shard) as d:
                self.done_ids.update(d.sample_ids)

    def _drain(self) -> None:
        while self._pending:
            self._pending.pop(0).result()


def claim_partial(path: str, manifest: str, *, resume: bool, overwrite: bool, settings: str) -> bool:
    """Check ``path`` and its ``.partial/`` folder before a capture; True when resuming one.

    A new capture gets an empty partial folder (the caller writes ``manifest`` into it once the
    folder is usable); a resumed one must have been started with the same ``manifest``.
    """
    partial_dir = path + PARTIAL_SUFFIX
    if os.path.exists(path) and not overwrite:
        raise BadInput(f"{path}: already exists; choose another path or pass --force to replace it")
    if not os.path.isdir(partial_dir):
        os.makedirs(partial_dir)
        return False
    if not resume:
        raise BadInput(f"{partial_dir}/ holds an unfinished capture: pass --resume to continue it, or delete it")
    try:
        with open(os.path.join(partial_dir, MANIFEST)) as fh:
            before = json.load(fh)
    except (OSError, ValueError):
        raise BadInput(f"{partial_dir}/ has no readable {MANIFEST}: delete the folder to start over") from None
    if before != json.loads(manifest):
        raise BadInput(
            f"{partial_dir}/ was captured with other {settings}: resume with the same settings, "
            "or delete the folder to start over"
        )
    return True


def stored_sample(
    sample_id: str, token_ids, states: Mapping[str, "torch.Tensor | np.ndarray"], streams: Mapping[str, StreamClaim]
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """A sample's token ids (int64) and its states laid out as stored, after checking every shape."""
    ids = token_array(sample_id, token_ids)
    if set(states) != set(streams):
        raise ValueError(f"sample {sample_id!r} has streams {sorted(states)}, expected {sorted(streams)}")
    stored = {}
    for name, claim in streams.items():
        s = states[name]
        if tuple(s.shape) != (len(ids), claim.width):
            raise ValueError(
                f"stream {name!r} of {sample_id!r} has shape {tuple(s.shape)}, expected ({len(ids)}, {claim.width})"
            )
        stored[name] = to_storage(s, claim.dtype)
    return ids, stored


def token_array(sample_id: str, token_ids) -> np.ndarray:
    """A sample's token ids as stored: 1-D int64."""
    ids = np.asarray(token_ids.cpu() if is_tensor(token_ids) else token_ids, dtype=np.int64)
    if ids.ndim != 1:
        raise ValueError(f"token ids of {sample_id!r} must be 1-D, got shape {ids.shape}")
    return ids


def _write_shard(path: str, provenance: Provenance, streams, buffer) -> None:
    offsets = np.cumsum([0] + [len(ids) for _, ids, _, _ in buffer])
    tmp = path + ".tmp"
    with create_file(tmp, provenance, streams, [sid for sid, _, _, _ in buffer], offsets) as f:
        f["tokens"][:] = np.concatenate([ids for _, ids, _, _ in buffer])
        for name in streams:
            f[f"streams/{name}"][:] = np.concatenate([st[name] for _, _, st, _ in buffer])
        write_marks(f, [mark or whole(len(ids)) for _, ids, _, mark in buffer])
        f.attrs["complete"] = True
    os.replace(tmp, path)


def _merge(shards: list[str], out: str, provenance: Provenance, streams) -> None:
    sample_ids: list[str] = []
    lengths: list[np.ndarray] = []
    marks: list[SampleMark] = []
    for shard in shards:
        with Dump(shard) as d:
            sample_ids += d.sample_ids
            lengths.append(np.diff(d.offsets))
            marks += [d.mark(i) for i in range(d.num_samples)]
    offsets = np.concatenate([[0], np.cumsum(np.concatenate(lengths))])
    with create_file(out, provenance, streams, sample_ids, offsets) as f:
        at = 0
        for shard in shards:
            with Dump(shard) as d:
                n = d.num_tokens
                f["tokens"][at : at + n] = d.token_ids_flat()
                for name, claim in streams.items():
                    src, dst = d.dataset(name), f[f"streams/{name}"]
                    step = max(1, MERGE_BLOCK_BYTES // (claim.width * src.dtype.itemsize))
                    for s in range(0, n, step):
                        e = min(n, s + step)
                        dst[at + s : at + e] = src[s:e]
                at += n
        write_marks(f, marks)
        f.attrs["complete"] = True
