"""Read a dump in bounded memory. Opening a dump never writes to it (HDF5 read-only mode)."""

from __future__ import annotations

import dataclasses
import os
import threading
from typing import Iterator, Sequence, TypeVar

import h5py
import numpy as np

from alignprobe.dump.direct_read import DirectRows
from alignprobe.dump.encoding import encoding_of, from_storage, stored_dtype
from alignprobe.dump.schema import (
    FINAL_NORM_POST,
    FORMAT_NAME,
    FORMAT_VERSION,
    ROLE_DRAFTER_INPUT,
    Provenance,
    StreamClaim,
)
from alignprobe.dump import h5_access as h5
from alignprobe.dump.marks import Marks, SampleMark, read_marks, whole
from alignprobe.dump.sample_index import SampleIndex
from alignprobe.errors import BadInput, first_line
from alignprobe.safe_paths import input_file

# Tokens read at once by iter_blocks: 4096 tokens of a 21504-wide float32 block is 352 MB, so the
# block is sized in bytes, not tokens. Small blocks are faster, not slower: under glibc's largest
# mmap threshold (32 MB) each block's arrays reuse freed heap memory instead of page-faulting fresh
# zeroed pages (at 64 MB the faults cost more than the read), and an 8 MB block stays in cache
# between the read, the widening and the caller's use (benchmarks/read_memory.py: 64 MB 0.7 GB/s,
# 16 MB 1.1, 8 MB 1.6 on a 2-core Xeon, warm page cache).
DEFAULT_BLOCK_BYTES = 8 << 20

PARTIAL_SUFFIX = ".partial"


@dataclasses.dataclass
class Block:
    """Consecutive tokens of one sample: ``states[i]`` is token ``start + i`` of the sample."""

    sample_index: int
    sample_id: str
    start: int
    states: np.ndarray  # float32 [n, width]


_Reader = TypeVar("_Reader", bound="StreamReads")


class StreamReads(SampleIndex):
    """The reads every dump-like reader (this HDF5 dump, a foreign folder read in place) derives from
    its streams' claims and encodings and its own ``read_raw`` and ``close``: written once, so the
    readers cannot disagree on them."""

    streams: dict[str, StreamClaim]
    _encodings: dict[str, str]

    def read_raw(self, stream: str, start: int, stop: int, columns: slice | None = None) -> np.ndarray:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def encoding(self, stream: str) -> str:
        self._claim(stream)
        return self._encodings[stream]

    def read(self, stream: str, start: int, stop: int, columns: slice | None = None) -> np.ndarray:
        """Flat tokens ``[start, stop)`` of a stream, widened to float32 (exactly)."""
        return from_storage(self.read_raw(stream, start, stop, columns), self._encodings[stream])

    def states(self, sample: int | str, stream: str) -> np.ndarray:
        """All states of one sample, float32 ``[length, width]`` (random access)."""
        start, stop = self.span(sample)
        return self.read(stream, start, stop)

    def block_tokens(self, stream: str, block_bytes: int = DEFAULT_BLOCK_BYTES) -> int:
        """How many tokens of ``stream`` fit in ``block_bytes`` once widened to float32."""
        return max(1, block_bytes // (4 * self._claim(stream).width))

    def iter_blocks(self, stream: str, samples: Sequence[int] | None = None,
                    max_tokens: int | None = None) -> Iterator[Block]:
        """Yield the states of ``samples`` (default: all, in order) as blocks of at most ``max_tokens``."""
        max_tokens = max_tokens or self.block_tokens(stream)
        for i in range(self.num_samples) if samples is None else samples:
            start, stop = self.span(i)
            for s in range(start, stop, max_tokens):
                yield Block(i, self.sample_ids[i], s - start, self.read(stream, s, min(stop, s + max_tokens)))

    def _claim(self, stream: str) -> StreamClaim:
        try:
            return self.streams[stream]
        except KeyError:
            raise BadInput(f"{self.path}: no stream {stream!r} (it has: {', '.join(self.streams)})") from None

    def __enter__(self: _Reader) -> _Reader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Dump(StreamReads):
    """An open dump. Use as a context manager, or call :meth:`close`."""

    cheap_random_reads = True  # chunks of ~1 MiB (layout.py)

    def __init__(self, path: str | os.PathLike):
        if not isinstance(path, (str, os.PathLike)):
            raise BadInput(f"a dump is opened from its path; got {type(path).__name__}")
        self.path = os.fspath(path)
        self.notes: list[str] = []  # what the reader had to fill in for an older or hand-written file
        self._file = _open_hdf5(self.path)
        self._opened = os.stat(self.path)
        try:
            self._load()
        except BadInput:
            self._file.close()
            raise
        except (KeyError, ValueError, TypeError, OSError, RuntimeError, AttributeError) as exc:
            # h5py's own errors on a damaged file (an object header it cannot parse opens as None)
            self._file.close()
            raise BadInput(f"{self.path}: not a readable alignprobe dump ({first_line(exc)})") from None

    # -- loading and validation ------------------------------------------------------------------

    def _load(self) -> None:
        f, where = self._file, self.path
        if h5.text_attr(f, "format", where, "") != FORMAT_NAME:
            raise BadInput(f"{where}: an HDF5 file, but not an alignprobe dump (no format={FORMAT_NAME!r} attribute)")
        self.version = h5.int_attr(f, "format_version", where, 0)
        if self.version > FORMAT_VERSION:
            raise BadInput(
                f"{where}: dump format version {self.version} is newer than this alignprobe reads "
                f"({FORMAT_VERSION}): upgrade alignprobe (pip install -U alignprobe)"
            )
        if self.version < 1:
            raise BadInput(f"{where}: format_version {self.version} is not a released dump format")
        if not h5.bool_attr(f, "complete", where, True):
            raise BadInput(f"{where}: the dump was not finished (complete=false): capture it again")
        provenance = h5.text_attr(f, "provenance", where, "")
        if provenance:
            self.provenance, notes = Provenance.from_json(provenance, f"{where}: provenance")
            self.notes += notes
        else:
            self.provenance = Provenance()
            self.notes.append("no provenance attribute: provenance left empty")
        ids = h5.member(f, "samples/ids", h5py.Dataset, where)
        offsets = h5.member(f, "samples/offsets", h5py.Dataset, where)
        self._tokens = h5.member(f, "tokens", h5py.Dataset, where)
        h5.integer_dataset(offsets, "samples/offsets", where)
        h5.integer_dataset(self._tokens, "tokens", where)
        if ids.ndim != 1 or ids.dtype.kind not in "SUO":
            raise BadInput(f"{where}: /samples/ids must be a 1-D list of strings, got {ids.dtype} {ids.shape}")
        self.sample_ids = [h5.as_text(s, "a sample id", f"{where}: /samples/ids") for s in self._guarded(lambda: ids[()])]
        self.offsets = np.asarray(self._guarded(lambda: offsets[()]), dtype=np.int64)
        self._check_offsets()
        # samples kept as an engine returned them (NaN/Inf rows, short rows): None when there are none
        self.marks: Marks | None = read_marks(f, self.offsets, where)
        self._index = {sid: i for i, sid in enumerate(self.sample_ids)}
        if len(self._index) != len(self.sample_ids):
            raise BadInput(f"{where}: /samples/ids holds duplicate ids")
        streams = h5.member(f, "streams", h5py.Group, where)
        found = h5.members(streams, h5py.Dataset, f"{where}: /streams", "streams")
        if not found:
            raise BadInput(f"{where}: no streams under /streams")
        self.streams: dict[str, StreamClaim] = {}
        self._datasets: dict[str, h5py.Dataset] = {}
        self._encodings: dict[str, str] = {}
        self._direct: dict[str, DirectRows | None] = {}  # built on a stream's first read (direct_read.py)
        self._fd: int | None = None
        self._direct_lock = threading.Lock()  # the pass's read-ahead and the explanations read at once
        for name, ds in found:
            self.streams[name] = self._read_claim(name, ds)
            self._datasets[name] = ds

    def _check_offsets(self) -> None:
        o, n = self.offsets, len(self.sample_ids)
        if o.ndim != 1 or len(o) != n + 1:
            raise BadInput(f"{self.path}: /samples/offsets has {len(o)} entries for {n} samples (needs {n + 1})")
        if o[0] != 0 or np.any(np.diff(o) < 0):
            raise BadInput(f"{self.path}: /samples/offsets must start at 0 and never decrease")
        if o[-1] != self._tokens.shape[0]:
            raise BadInput(
                f"{self.path}: /samples/offsets ends at {o[-1]} but /tokens holds {self._tokens.shape[0]} tokens"
            )

    def _read_claim(self, name: str, ds: h5py.Dataset) -> StreamClaim:
        where = f"{self.path}: stream {name!r}"
        if ds.ndim != 2:
            raise BadInput(f"{where} has shape {ds.shape}; streams are [tokens, width]")
        if ds.shape[0] != self.num_tokens:
            raise BadInput(f"{where} has {ds.shape[0]} rows but the dump has {self.num_tokens} tokens")
        if "hf_indices" not in ds.attrs:
            raise BadInput(f"{where} has no hf_indices attribute: say which HF indices it holds")
        hf_indices = h5.int_list_attr(ds, "hf_indices", where)
        width = ds.shape[1]
        if "hidden_size" in ds.attrs:
            hidden_size = h5.int_attr(ds, "hidden_size", where)
        else:
            hidden_size = width // max(1, len(hf_indices))
            self.notes.append(f"stream {name!r}: no hidden_size attribute, took width/len(hf_indices) = {hidden_size}")
        if "num_layers" in ds.attrs:
            num_layers = h5.int_attr(ds, "num_layers", where)
        else:
            num_layers = max(hf_indices)
            self.notes.append(f"stream {name!r}: no num_layers attribute, took the largest HF index = {num_layers}")
        stored = stored_dtype(ds.dtype, h5.text_attr(ds, "encoding", where, ""), where)
        encoding = encoding_of(stored)
        if "dtype" in ds.attrs:
            dtype = h5.text_attr(ds, "dtype", where)
            if dtype != stored:
                raise BadInput(f"{where} is stored as {ds.dtype} ({stored}) but claims dtype {dtype!r}")
        else:
            dtype = stored
            self.notes.append(f"stream {name!r}: no dtype attribute, took {dtype} from the stored type")
        final_norm = h5.text_attr(ds, "final_norm", where, FINAL_NORM_POST)
        role = h5.text_attr(ds, "role", where, ROLE_DRAFTER_INPUT)
        try:
            claim = StreamClaim(
                hf_indices=tuple(hf_indices),
                hidden_size=hidden_size,
                num_layers=num_layers,
                dtype=dtype,
                final_norm=final_norm,
                role=role,
                note=h5.text_attr(ds, "note", where, ""),
            )
        except ValueError as exc:
            raise BadInput(f"{where}: {exc}") from None
        if claim.width != width:
            raise BadInput(
                f"{where} is {width} wide but claims {len(hf_indices)} slices of hidden size {hidden_size} "
                f"(= {claim.width})"
            )
        self._encodings[name] = encoding
        return claim

    # -- facts -----------------------------------------------------------------------------------

    def mark(self, sample: int | str) -> SampleMark:
        """What the engine returned for a sample: the rows it returned, how many were not finite."""
        i = self.index_of(sample) if isinstance(sample, str) else int(sample)
        return self.marks.mark(i) if self.marks is not None else whole(self.sample_length(i))

    def token_ids(self, sample: int | str) -> np.ndarray:
        start, stop = self.span(sample)
        return self._guarded(lambda: self._tokens[start:stop])

    def token_ids_flat(self) -> np.ndarray:
        """Token ids of all samples back to back ``[num_tokens]``."""
        return self._guarded(lambda: self._tokens[()])

    def dataset(self, stream: str) -> h5py.Dataset:
        """The raw HDF5 dataset of a stream (stored encoding: bfloat16 is uint16 bits)."""
        self._claim(stream)
        return self._datasets[stream]

    # -- states ----------------------------------------------------------------------------------

    def read_raw(self, stream: str, start: int, stop: int, columns: slice | None = None) -> np.ndarray:
        """As :meth:`read`, in the stored encoding (:meth:`encoding`: bfloat16 as uint16 bits)."""
        self._claim(stream)
        ds = self._datasets[stream]
        direct = self._guarded(lambda: self._direct_rows(stream))
        if direct is not None:
            rows = self._guarded(lambda: direct.read(start, stop, columns))
            if rows is not None:
                return rows
        key = (slice(start, stop), columns if columns is not None else slice(None))
        return self._guarded(lambda: ds[key])

    def _direct_rows(self, stream: str) -> DirectRows | None:
        with self._direct_lock:
            if stream not in self._direct:
                if self._fd is None:
                    self._fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
                # the path may name another file by now (replaced since the open): its offsets would
                # be read from the wrong bytes, so h5py, which holds the file it opened, reads instead
                same = _same_file(os.fstat(self._fd), self._opened)
                self._direct[stream] = DirectRows.of(self._fd, self._datasets[stream]) if same else None
            return self._direct[stream]

    # -- plumbing --------------------------------------------------------------------------------

    def _guarded(self, read):
        try:
            return read()
        except (OSError, ValueError, RuntimeError) as exc:
            raise BadInput(f"{self.path}: cannot read the file, it is damaged ({first_line(exc)})") from None

    def close(self) -> None:
        self._file.close()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._direct.clear()

    def __repr__(self) -> str:
        streams = ", ".join(f"{n}[{c.width}]" for n, c in self.streams.items())
        return f"Dump({self.path!r}, samples={self.num_samples}, tokens={self.num_tokens}, streams=[{streams}])"


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino, a.st_size, a.st_mtime_ns) == (b.st_dev, b.st_ino, b.st_size, b.st_mtime_ns)


def open_dump(path: str | os.PathLike) -> Dump:
    """Open a dump read-only; raises :class:`BadInput` with a one-line reason when it cannot."""
    return Dump(path)


def _open_hdf5(path: str) -> h5py.File:
    if os.path.isdir(path):
        if path.rstrip("/").endswith(PARTIAL_SUFFIX):
            raise BadInput(f"{path}: an unfinished capture; rerun the capture with --resume to finish it")
        raise BadInput(f"{path}: is a directory, not a dump file (foreign dumps: alignprobe import)")
    if not os.path.lexists(path):
        if os.path.isdir(path + PARTIAL_SUFFIX):
            raise BadInput(
                f"{path}: not found, but {path}{PARTIAL_SUFFIX}/ holds an unfinished capture: rerun it with --resume"
            )
        raise BadInput(f"{path}: no such file")
    input_file(path, "dump file")
    try:
        is_hdf5 = h5py.is_hdf5(path)
    except (OSError, RuntimeError, ValueError) as exc:
        raise BadInput(f"{path}: cannot read it ({first_line(exc)})") from None
    if not is_hdf5:
        raise BadInput(f"{path}: not an HDF5 file (an alignprobe dump is HDF5; see docs/dump-format.md)")
    try:
        return h5py.File(path, "r")
    except (OSError, RuntimeError, ValueError) as exc:
        raise BadInput(f"{path}: cannot open the HDF5 file, it is truncated or damaged ({first_line(exc)})") from None

