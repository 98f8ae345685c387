"""A foreign folder (any layout of registry.py) read in place, as a Dump-like source.

``compare`` used to import a foreign side into a temporary dump first: every state byte read,
written, and read again (0.20x of a raw read of the same files on the GPU host, issue 15). This
serves the comparer's reads straight from the files, with what an import would have written:
the same claims, sample ids, kept rows (right padding dropped) and stored bits (``to_storage`` of
the same tensors), so a comparison gives the same result either way (tests/importers/test_folder_source.py).

Opening reads the plan (the first file) and the token ids of every file (a mapped ``torch.load`` or
safetensors reads just those bytes). States are read on demand, each read copied into a new array:
- a zip checkpoint (what ``torch.save`` writes) is loaded mapped: a read copies its rows from the
  mapping, so a random read (the mapping search's windows, the explanations' samples) reads only
  those pages; while one file is read, the next is read into the page cache by a thread (sequential
  reads at the disk's speed, the GIL released), so the streaming pass's page faults find memory
  and the disk reads while the comparison computes. A few mappings stay open (MAPPED_FILES).
  ``torch.load(mmap=False)`` was slower: it copies every storage out of the zip, 0.6 GB/s from memory
  on the 2-core box, against 1.7 GB/s for the mapped copy (benchmarks/README.md, "Import and compare
  of a foreign folder");
- a speculators safetensors file is read through safetensors' own slices: a read takes only its
  rows (FP8 dequantized row by row, the same arithmetic as the whole-file reader), the next file
  read into the page cache as for checkpoints;
- a file that can be neither (``.ckpt.gz``, a legacy pickle, an unusual safetensors layout) is
  decoded whole into a small LRU (decoded_files.py), the next file decoded ahead in a thread when
  the reads run through the files in order; a second read of a file there does not decode it again.
Memory: the LRU's budget (``budget_bytes``, at least three files), the mapped files' touched pages,
and the blocks the caller holds. A file truncated while it is mapped would crash the process (SIGBUS),
as any mapped reader does: the folder must not change during a comparison.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import os
import threading
from typing import Any, Sequence

import numpy as np

from alignprobe.dump.encoding import STORAGE_DTYPE, TORCH_DTYPE, encoding_of, to_storage
from alignprobe.dump.reader import StreamReads
from alignprobe.dump.schema import StreamClaim
from alignprobe.errors import BadInput, first_line
from alignprobe.importers.decoded_files import DecodedFiles
from alignprobe.importers.files import is_mapped_checkpoint, read_through
from alignprobe.importers.importer import (
    ImportPlan,
    SampleNames,
    kept_streams,
    plan_import,
    plan_samples,
    provenance_of,
    read_sample,
)
from alignprobe.importers.sample import ForeignSample

DEFAULT_BUDGET_BYTES = 384 << 20  # decoded files held at once (at least three whatever their size)
MAPPED_FILES = 3  # mapped checkpoints kept open (their touched pages count as resident while mapped)


@dataclasses.dataclass(frozen=True)
class StreamShape:
    """What the comparer asks of a stream's dataset: its shape, stored dtype and (no) HDF5 chunks."""

    shape: tuple[int, int]
    dtype: np.dtype
    chunks: None = None


class FolderSource(StreamReads):
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
        self.marks = None  # every row of a foreign file is a row its system returned (dump/marks.py)
        self._encodings = {name: encoding_of(c.dtype) for name, c in self.streams.items()}
        self._cache: DecodedFiles[dict[str, np.ndarray]] = DecodedFiles(
            self._decoded, lambda states: sum(a.nbytes for a in states.values()), budget_bytes)
        self._mapped: collections.OrderedDict[int, dict[str, np.ndarray]] = collections.OrderedDict()
        self._mapped_lock = threading.Lock()
        self._lazy: collections.OrderedDict[int, Any] = collections.OrderedDict()
        self._can_map: dict[int, bool] = {}
        self._warmed: set[int] = set()
        self._warmer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="alignprobe-read-ahead-file")

    # -- facts (as Dump) -------------------------------------------------------------------------

    def token_ids(self, sample: int | str) -> np.ndarray:
        start, stop = self.span(sample)
        return self._tokens[start:stop].copy()

    def token_ids_flat(self) -> np.ndarray:
        return self._tokens.copy()

    def dataset(self, stream: str) -> StreamShape:
        """The stream's shape and stored dtype (there is no HDF5 dataset behind it)."""
        claim = self._claim(stream)
        return StreamShape((self.num_tokens, claim.width), np.dtype(STORAGE_DTYPE[claim.dtype]))

    # -- states ----------------------------------------------------------------------------------

    def read_raw(self, stream: str, start: int, stop: int, columns: slice | None = None) -> np.ndarray:
        """As :meth:`read`, in the stored encoding (bfloat16 as uint16 bits): a new array, one copy."""
        claim = self._claim(stream)
        start, stop = max(0, int(start)), min(self.num_tokens, int(stop))
        stop = max(start, stop)
        columns = columns if columns is not None else slice(None)
        ncols = len(range(*columns.indices(claim.width)))
        out = np.empty((stop - start, ncols), dtype=STORAGE_DTYPE[claim.dtype])
        row = start
        while row < stop:
            k = int(np.searchsorted(self.offsets, row, side="right")) - 1
            first, end = int(self.offsets[k]), min(stop, int(self.offsets[k + 1]))
            piece = self._lazy_rows(k, stream, row - first, end - first)
            if piece is None:
                piece = self._file_states(k)[stream][row - first : end - first]
            # numpy's copy of the stored bits: torch's bfloat16 copy_ ran at 0.25 GB/s here, 17x slower
            np.copyto(out[row - start : end - start], piece[:, columns])
            row = end
        return out

    def held_files(self) -> int:
        """Files whose states are held now: mapped checkpoints and decoded files (the memory bound)."""
        with self._mapped_lock:
            mapped = len(self._mapped)
        return mapped + len(self._cache)

    @property
    def decoded_files(self) -> DecodedFiles:
        """The LRU of decoded files (what a test inspects to see memory stay bounded)."""
        return self._cache

    # -- plumbing --------------------------------------------------------------------------------

    def _file_states(self, k: int) -> dict[str, np.ndarray]:
        """File ``k``'s streams as stored (kept rows only). A zip checkpoint is mapped (its rows are
        read when copied out), and the next file is read into the page cache in a thread meanwhile;
        another file is decoded whole into the LRU, the next one decoded ahead when the reads run
        through the files in order (this one or the one before is decoded already)."""
        mapped = self._mapped_states(k)
        if mapped is not None:
            self._warm(k + 1)
            return mapped
        sequential = k == 0 or self._cache.holds(k) or self._cache.holds(k - 1)
        states = self._cache.get(k)
        if sequential and k + 1 < len(self._planned):
            self._cache.prefetch(k + 1)
        return states

    def _lazy_rows(self, k: int, stream: str, a: int, b: int) -> np.ndarray | None:
        """Rows ``[a, b)`` of a sample read by themselves (a speculators file's safetensors slices), in the
        stored encoding; None for a sample that is read whole instead (a layout with no row reader)."""
        if not self.plan.layout.row_reader:
            return None
        lazy = self._lazy_file(k)
        if lazy is None:
            return None
        try:
            rows = lazy.rows(a, b)
        except BadInput:
            raise
        except Exception as exc:  # noqa: BLE001 - safetensors' own errors on a damaged file
            raise BadInput(f"{lazy.path}: not a readable safetensors file ({first_line(exc)})") from None
        cut = self.plan.aux_slices * self.plan.hidden_size  # as streams_of splits the aux tensor
        states = rows[:, :cut] if stream == "aux" else rows[:, cut:]
        dtype = self.streams[stream].dtype
        return to_storage(states if states.dtype == TORCH_DTYPE[dtype] else states.to(TORCH_DTYPE[dtype]), dtype)

    def _lazy_file(self, k: int):
        with self._mapped_lock:
            if k in self._lazy:
                self._lazy.move_to_end(k)
                return self._lazy[k]
        path = self.plan.samples[k]
        lazy = self.plan.layout.lazy_rows(path)
        if lazy is not None:
            _, length, pad = self._planned[k]
            if len(lazy.token_ids) != length + pad:
                raise BadInput(f"{path}: changed while it was read ({length + pad} tokens, now {len(lazy.token_ids)})")
            if lazy.shape[-1] != self.plan.hidden_size:
                raise BadInput(f"{path}: hidden size {lazy.shape[-1]}, but the first file's is {self.plan.hidden_size}")
            if lazy.shape[1] * lazy.shape[2] != self.plan.file_width:
                raise BadInput(f"{path}: the layer states are {lazy.shape[1] * lazy.shape[2]} wide, "
                               f"but the first file's are {self.plan.file_width}")
        with self._mapped_lock:
            self._lazy[k] = lazy
            while len(self._lazy) > MAPPED_FILES:
                self._lazy.popitem(last=False)
        if lazy is not None:
            self._warm(k + 1)
        return lazy

    def _decoded(self, k: int) -> dict[str, np.ndarray]:
        return self._states_of(k, read_sample(self.plan.layout, self.plan.samples[k], False))

    def _mappable(self, k: int) -> bool:
        if k not in self._can_map:
            self._can_map[k] = self.plan.layout.mappable and is_mapped_checkpoint(self.plan.samples[k].path)
        return self._can_map[k]

    def _warmable(self, k: int) -> bool:
        """Files read in place (mapped checkpoints, safetensors) are worth reading into the page cache."""
        return self.plan.layout.row_reader or self._mappable(k)

    def _mapped_states(self, k: int) -> dict[str, np.ndarray] | None:
        """A zip checkpoint loaded mapped (no byte is read until a row is copied out), or None for a
        file that cannot be mapped (gzip, a legacy pickle, safetensors)."""
        if not self._mappable(k):
            return None
        with self._mapped_lock:
            if k in self._mapped:
                self._mapped.move_to_end(k)
                return self._mapped[k]
        states = self._states_of(k, read_sample(self.plan.layout, self.plan.samples[k], True))
        with self._mapped_lock:
            self._mapped[k] = states
            while len(self._mapped) > MAPPED_FILES:
                self._mapped.popitem(last=False)  # unmapped once the last block copied from it is gone
        return states

    def _warm(self, k: int) -> None:
        """Read file ``k`` into the page cache in the background (sequential reads at the disk's speed,
        the GIL released), so the page faults of the mapped rows copied from it later find memory."""
        with self._mapped_lock:
            if k >= len(self._planned) or k in self._warmed or not self._warmable(k):
                return
            self._warmed.add(k)
        self._warmer.submit(read_through, self.plan.samples[k].path)

    def _states_of(self, k: int, sample: ForeignSample) -> dict[str, np.ndarray]:
        """What an import writes of a file: its streams' kept rows in the claimed dtype (float64 and the
        like widened or narrowed exactly as the import does)."""
        _, length, pad = self._planned[k]
        out = {}
        for name, states in kept_streams(sample, self.plan, length, pad).items():
            dtype = TORCH_DTYPE[self.streams[name].dtype]
            states = states if states.dtype == dtype else states.to(dtype)
            out[name] = to_storage(states, self.streams[name].dtype)  # a view of the tensor, no copy
        return out

    def close(self) -> None:
        self._warmer.shutdown(wait=True, cancel_futures=True)
        self._cache.close()
        with self._mapped_lock:
            self._mapped.clear()

    def __repr__(self) -> str:
        streams = ", ".join(f"{n}[{c.width}]" for n, c in self.streams.items())
        return (f"FolderSource({self.path!r}, {self.plan.format}, samples={self.num_samples}, "
                f"tokens={self.num_tokens}, streams=[{streams}])")
