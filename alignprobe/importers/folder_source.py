"""A foreign folder (SpecForge, speculators, EAGLE ge_data) read in place, as a Dump-like source.

``compare`` used to import a foreign side into a temporary dump first: every state byte read,
written, and read again (0.20x of a raw read of the same files on the GPU host, issue 15). This
serves the comparer's reads straight from the files, with what an import would have written:
the same claims, sample ids, kept rows (right padding dropped) and stored bits (``to_storage`` of
the same tensors), so a comparison gives the same result either way (tests/test_folder_source.py).

Opening reads the plan (the first file) and the token ids of every file (a mapped ``torch.load`` or
safetensors reads just those bytes). States are read on demand:
- sequential reads (the streaming pass, block after block) come from whole decoded files in a small
  LRU (decoded_files.py), the next file decoded ahead in a thread while this one is compared;
- a random read (the mapping search's windows, the explanations' samples) of a file that is not
  decoded takes its rows from a mapped ``torch.load`` (zip checkpoints: only those pages are read);
  a file that cannot be mapped (``.ckpt.gz``, a legacy pickle, safetensors) is decoded into the LRU,
  so a second read of it does not decode it again.
Memory: the LRU's budget (``budget_bytes``, at least two files) and the blocks the caller holds.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import zipfile
from typing import Iterator, Sequence

import numpy as np
import torch

from alignprobe.dump.encoding import STORAGE_DTYPE, TORCH_DTYPE, encoding_of, from_storage
from alignprobe.dump.reader import DEFAULT_BLOCK_BYTES, Block
from alignprobe.dump.schema import StreamClaim
from alignprobe.errors import BadInput
from alignprobe.importers import specforge
from alignprobe.importers.decoded_files import DecodedFiles
from alignprobe.importers.detect import SPECULATORS
from alignprobe.importers.importer import (
    ImportPlan,
    SampleNames,
    check_like_first,
    plan_import,
    plan_samples,
    provenance_of,
    read_sample,
    streams_of,
)
from alignprobe.importers.sample import ForeignSample

DEFAULT_BUDGET_BYTES = 384 << 20  # decoded files held at once (at least two whatever their size)
MAPPED_FILES = 16  # mapped checkpoints kept open for random reads (a mapping holds no memory of its own)


@dataclasses.dataclass(frozen=True)
class StreamShape:
    """What the comparer asks of a stream's dataset: its shape, stored dtype and (no) HDF5 chunks."""

    shape: tuple[int, int]
    dtype: np.dtype
    chunks: None = None


class FolderSource:
    """A foreign folder with a Dump's reading interface (claims, sample ids, token ids, ``read``)."""

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        layer_ids: Sequence[int] | None = None,
        system: str | None = None,
        config: str | os.PathLike | None = None,
        num_layers: int | None = None,
        target_config: str | os.PathLike | None = None,
        ids_from: str | os.PathLike | None = None,
        progress: bool = False,
        budget_bytes: int = DEFAULT_BUDGET_BYTES,
    ):
        self.path = os.fspath(path)
        self.notes: list[str] = []
        plan = plan_import(self.path, system=system, layer_ids=layer_ids, config=config, num_layers=num_layers,
                           target_config=target_config)
        self.plan: ImportPlan = plan
        self.provenance = provenance_of(plan, self.path, target_config)
        kept: list[np.ndarray] = []
        self._planned = plan_samples(plan, SampleNames(ids_from), progress, kept)
        self.sample_ids = [sid for sid, _, _ in self._planned]
        self._index = {sid: i for i, sid in enumerate(self.sample_ids)}
        lengths = np.array([length for _, length, _ in self._planned], dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        self._tokens = np.concatenate(kept).astype(np.int64, copy=False)
        self.streams: dict[str, StreamClaim] = dict(plan.streams)
        self._encodings = {name: encoding_of(c.dtype) for name, c in self.streams.items()}
        self._cache: DecodedFiles[dict[str, torch.Tensor]] = DecodedFiles(
            self._decoded, lambda states: sum(t.numel() * t.element_size() for t in states.values()), budget_bytes)
        self._mapped: dict[int, dict[str, torch.Tensor]] = {}
        self._mapped_lock = threading.Lock()

    # -- facts (as Dump) -------------------------------------------------------------------------

    @property
    def num_samples(self) -> int:
        return len(self.sample_ids)

    @property
    def num_tokens(self) -> int:
        return int(self.offsets[-1])

    def index_of(self, sample_id: str) -> int:
        try:
            return self._index[sample_id]
        except KeyError:
            raise BadInput(f"{self.path}: no sample with id {sample_id!r}") from None

    def span(self, sample: int | str) -> tuple[int, int]:
        i = self.index_of(sample) if isinstance(sample, str) else int(sample)
        return int(self.offsets[i]), int(self.offsets[i + 1])

    def sample_length(self, sample: int | str) -> int:
        start, stop = self.span(sample)
        return stop - start

    def token_ids(self, sample: int | str) -> np.ndarray:
        start, stop = self.span(sample)
        return self._tokens[start:stop].copy()

    def token_ids_flat(self) -> np.ndarray:
        return self._tokens.copy()

    def encoding(self, stream: str) -> str:
        self._claim(stream)
        return self._encodings[stream]

    def dataset(self, stream: str) -> StreamShape:
        """The stream's shape and stored dtype (there is no HDF5 dataset behind it)."""
        claim = self._claim(stream)
        return StreamShape((self.num_tokens, claim.width), np.dtype(STORAGE_DTYPE[claim.dtype]))

    # -- states ----------------------------------------------------------------------------------

    def read(self, stream: str, start: int, stop: int, columns: slice | None = None) -> np.ndarray:
        """Flat tokens ``[start, stop)`` of a stream, widened to float32 (exactly)."""
        return from_storage(self.read_raw(stream, start, stop, columns), self._encodings[stream])

    def read_raw(self, stream: str, start: int, stop: int, columns: slice | None = None) -> np.ndarray:
        """As :meth:`read`, in the stored encoding (bfloat16 as uint16 bits): a new array, one copy."""
        claim = self._claim(stream)
        start, stop = max(0, int(start)), min(self.num_tokens, int(stop))
        stop = max(start, stop)
        columns = columns if columns is not None else slice(None)
        ncols = len(range(*columns.indices(claim.width)))
        out = np.empty((stop - start, ncols), dtype=STORAGE_DTYPE[claim.dtype])
        target = torch.from_numpy(out.view(np.int16)).view(torch.bfloat16) if claim.dtype == "bfloat16" \
            else torch.from_numpy(out)
        row = start
        while row < stop:
            k = int(np.searchsorted(self.offsets, row, side="right")) - 1
            first, end = int(self.offsets[k]), min(stop, int(self.offsets[k + 1]))
            states = self._file_states(k)[stream]
            target[row - start : end - start].copy_(states[row - first : end - first, columns])
            row = end
        return out

    def states(self, sample: int | str, stream: str) -> np.ndarray:
        start, stop = self.span(sample)
        return self.read(stream, start, stop)

    def block_tokens(self, stream: str, block_bytes: int = DEFAULT_BLOCK_BYTES) -> int:
        return max(1, block_bytes // (4 * self._claim(stream).width))

    def iter_blocks(self, stream: str, samples: Sequence[int] | None = None,
                    max_tokens: int | None = None) -> Iterator[Block]:
        max_tokens = max_tokens or self.block_tokens(stream)
        for i in range(self.num_samples) if samples is None else samples:
            start, stop = self.span(i)
            for s in range(start, stop, max_tokens):
                yield Block(i, self.sample_ids[i], s - start, self.read(stream, s, min(stop, s + max_tokens)))

    @property
    def decoded_files(self) -> DecodedFiles:
        """The LRU of decoded files (what a test inspects to see memory stay bounded)."""
        return self._cache

    # -- plumbing --------------------------------------------------------------------------------

    def _file_states(self, k: int) -> dict[str, torch.Tensor]:
        """File ``k``'s streams as stored (kept rows only): decoded whole when the reads run through
        the files in order (it or the one before is decoded already), mapped for a random read."""
        if k == 0 or self._cache.holds(k) or self._cache.holds(k - 1):
            states = self._cache.get(k)
            if k + 1 < len(self._planned):
                self._cache.prefetch(k + 1)
            return states
        mapped = self._mapped_states(k)
        return mapped if mapped is not None else self._cache.get(k)

    def _decoded(self, k: int) -> dict[str, torch.Tensor]:
        return self._states_of(k, read_sample(self.plan.format, self.plan.files[k], False))

    def _mapped_states(self, k: int) -> dict[str, torch.Tensor] | None:
        """A zip checkpoint loaded mapped (rows are read when sliced), or None for one that cannot be."""
        path = self.plan.files[k]
        if self.plan.format == SPECULATORS or path.endswith(".gz") or not zipfile.is_zipfile(path):
            return None
        with self._mapped_lock:
            if k in self._mapped:
                return self._mapped[k]
        states = self._states_of(k, read_sample(self.plan.format, path, True))
        with self._mapped_lock:
            while len(self._mapped) >= MAPPED_FILES:
                self._mapped.pop(next(iter(self._mapped)))
            self._mapped[k] = states
        return states

    def _states_of(self, k: int, sample: ForeignSample) -> dict[str, torch.Tensor]:
        """What an import writes of a file: its streams' kept rows in the claimed dtype (float64 and the
        like widened or narrowed exactly as the import does)."""
        check_like_first(sample, self.plan)
        _, length, pad = self._planned[k]
        if len(sample.token_ids) != length + pad:
            raise BadInput(f"{sample.path}: changed while it was read ({length + pad} tokens, now {len(sample.token_ids)})")
        if pad:
            sample = sample.truncated(length)
        out = {}
        for name, states in streams_of(sample, self.plan).items():
            dtype = TORCH_DTYPE[self.streams[name].dtype]
            out[name] = states if states.dtype == dtype else states.to(dtype)
        return out

    def _claim(self, stream: str) -> StreamClaim:
        try:
            return self.streams[stream]
        except KeyError:
            raise BadInput(f"{self.path}: no stream {stream!r} (it has: {', '.join(self.streams)})") from None

    def close(self) -> None:
        self._cache.close()
        with self._mapped_lock:
            self._mapped.clear()

    def __enter__(self) -> "FolderSource":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        streams = ", ".join(f"{n}[{c.width}]" for n, c in self.streams.items())
        return (f"FolderSource({self.path!r}, {self.plan.format}, samples={self.num_samples}, "
                f"tokens={self.num_tokens}, streams=[{streams}])")


def open_in_place(path: str | os.PathLike, **options) -> FolderSource:
    """A foreign folder opened for reading in place (options as :func:`~alignprobe.importers.open_source`'s)."""
    return FolderSource(path, **options)

