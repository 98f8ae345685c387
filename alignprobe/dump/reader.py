"""Read a dump in bounded memory. Opening a dump never writes to it (HDF5 read-only mode)."""

from __future__ import annotations

import dataclasses
import os
from typing import Iterator, Sequence

import h5py
import numpy as np

from alignprobe.dump.encoding import ENCODING_BF16_BITS, ENCODING_NATIVE, STORAGE_DTYPE, from_storage
from alignprobe.dump.schema import (
    FINAL_NORM_POST,
    FORMAT_NAME,
    FORMAT_VERSION,
    ROLE_DRAFTER_INPUT,
    Provenance,
    StreamClaim,
)
from alignprobe.errors import BadInput, first_line

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


class Dump:
    """An open dump. Use as a context manager, or call :meth:`close`."""

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        self.notes: list[str] = []  # what the reader had to fill in for an older or hand-written file
        self._file = _open_hdf5(self.path)
        try:
            self._load()
        except BadInput:
            self._file.close()
            raise
        except (KeyError, ValueError, TypeError, OSError) as exc:
            self._file.close()
            raise BadInput(f"{self.path}: not a readable alignprobe dump ({first_line(exc)})") from None

    # -- loading and validation ------------------------------------------------------------------

    def _load(self) -> None:
        f = self._file
        if f.attrs.get("format") != FORMAT_NAME:
            raise BadInput(f"{self.path}: an HDF5 file, but not an alignprobe dump (no format={FORMAT_NAME!r} attribute)")
        self.version = int(f.attrs.get("format_version", 0))
        if self.version > FORMAT_VERSION:
            raise BadInput(
                f"{self.path}: dump format version {self.version} is newer than this alignprobe reads "
                f"({FORMAT_VERSION}): upgrade alignprobe (pip install -U alignprobe)"
            )
        if self.version < 1:
            raise BadInput(f"{self.path}: format_version {self.version} is not a released dump format")
        if not bool(f.attrs.get("complete", True)):
            raise BadInput(f"{self.path}: the dump was not finished (complete=false): capture it again")
        if "provenance" in f.attrs:
            self.provenance, notes = Provenance.from_json(_as_str(f.attrs["provenance"]))
            self.notes += notes
        else:
            self.provenance = Provenance()
            self.notes.append("no provenance attribute: provenance left empty")
        for name in ("samples/ids", "samples/offsets", "tokens"):
            if name not in f:
                raise BadInput(f"{self.path}: dataset /{name} is missing")
        self.sample_ids = [_as_str(s) for s in f["samples/ids"][()]]
        self.offsets = np.asarray(f["samples/offsets"][()], dtype=np.int64)
        self._tokens = f["tokens"]
        self._check_offsets()
        self._index = {sid: i for i, sid in enumerate(self.sample_ids)}
        if len(self._index) != len(self.sample_ids):
            raise BadInput(f"{self.path}: /samples/ids holds duplicate ids")
        if "streams" not in f or not len(f["streams"]):
            raise BadInput(f"{self.path}: no streams under /streams")
        self.streams: dict[str, StreamClaim] = {}
        self._datasets: dict[str, h5py.Dataset] = {}
        self._encodings: dict[str, str] = {}
        for name, ds in f["streams"].items():
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
        a = ds.attrs
        if "hf_indices" not in a:
            raise BadInput(f"{where} has no hf_indices attribute: say which HF indices it holds")
        hf_indices = [int(i) for i in np.atleast_1d(a["hf_indices"])]
        width = ds.shape[1]
        if "hidden_size" in a:
            hidden_size = int(a["hidden_size"])
        else:
            hidden_size = width // max(1, len(hf_indices))
            self.notes.append(f"stream {name!r}: no hidden_size attribute, took width/len(hf_indices) = {hidden_size}")
        if "num_layers" in a:
            num_layers = int(a["num_layers"])
        else:
            num_layers = max(hf_indices)
            self.notes.append(f"stream {name!r}: no num_layers attribute, took the largest HF index = {num_layers}")
        encoding = _as_str(a.get("encoding", ""))
        if encoding not in (ENCODING_NATIVE, ENCODING_BF16_BITS):
            if ds.dtype == np.uint16:
                raise BadInput(f"{where} is uint16 without encoding='{ENCODING_BF16_BITS}': cannot tell it is bfloat16")
            encoding = ENCODING_NATIVE
        if "dtype" in a:
            dtype = _as_str(a["dtype"])
        else:
            dtype = "bfloat16" if encoding == ENCODING_BF16_BITS else str(ds.dtype)
            self.notes.append(f"stream {name!r}: no dtype attribute, took {dtype} from the stored type")
        if dtype not in STORAGE_DTYPE or ds.dtype != STORAGE_DTYPE[dtype]:
            raise BadInput(f"{where} is stored as {ds.dtype} but claims dtype {dtype!r}")
        final_norm = _as_str(a.get("final_norm", FINAL_NORM_POST))
        role = _as_str(a.get("role", ROLE_DRAFTER_INPUT))
        try:
            claim = StreamClaim(
                hf_indices=hf_indices,
                hidden_size=hidden_size,
                num_layers=num_layers,
                dtype=dtype,
                final_norm=final_norm,
                role=role,
                note=_as_str(a.get("note", "")),
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
        """Flat token range ``[start, stop)`` of a sample, by position or id."""
        i = self.index_of(sample) if isinstance(sample, str) else int(sample)
        return int(self.offsets[i]), int(self.offsets[i + 1])

    def sample_length(self, sample: int | str) -> int:
        start, stop = self.span(sample)
        return stop - start

    def token_ids(self, sample: int | str) -> np.ndarray:
        start, stop = self.span(sample)
        return self._guarded(lambda: self._tokens[start:stop])

    def token_ids_flat(self) -> np.ndarray:
        """Token ids of all samples back to back ``[num_tokens]``."""
        return self._guarded(lambda: self._tokens[()])

    def encoding(self, stream: str) -> str:
        self._claim(stream)
        return self._encodings[stream]

    def dataset(self, stream: str) -> h5py.Dataset:
        """The raw HDF5 dataset of a stream (stored encoding: bfloat16 is uint16 bits)."""
        self._claim(stream)
        return self._datasets[stream]

    # -- states ----------------------------------------------------------------------------------

    def read(self, stream: str, start: int, stop: int, columns: slice | None = None) -> np.ndarray:
        """Flat tokens ``[start, stop)`` of a stream, widened to float32 (exactly)."""
        return from_storage(self.read_raw(stream, start, stop, columns), self._encodings[stream])

    def read_raw(self, stream: str, start: int, stop: int, columns: slice | None = None) -> np.ndarray:
        """As :meth:`read`, in the stored encoding (:meth:`encoding`: bfloat16 as uint16 bits)."""
        self._claim(stream)
        ds = self._datasets[stream]
        key = (slice(start, stop), columns if columns is not None else slice(None))
        return self._guarded(lambda: ds[key])

    def states(self, sample: int | str, stream: str) -> np.ndarray:
        """All states of one sample, float32 ``[length, width]`` (random access)."""
        start, stop = self.span(sample)
        return self.read(stream, start, stop)

    def block_tokens(self, stream: str, block_bytes: int = DEFAULT_BLOCK_BYTES) -> int:
        """How many tokens of ``stream`` fit in ``block_bytes`` once widened to float32."""
        return max(1, block_bytes // (4 * self._claim(stream).width))

    def iter_blocks(
        self,
        stream: str,
        samples: Sequence[int] | None = None,
        max_tokens: int | None = None,
    ) -> Iterator[Block]:
        """Yield the states of ``samples`` (default: all, in order) as blocks of at most ``max_tokens``."""
        max_tokens = max_tokens or self.block_tokens(stream)
        for i in range(self.num_samples) if samples is None else samples:
            start, stop = self.span(i)
            for s in range(start, stop, max_tokens):
                e = min(stop, s + max_tokens)
                yield Block(i, self.sample_ids[i], s - start, self.read(stream, s, e))

    # -- plumbing --------------------------------------------------------------------------------

    def _claim(self, stream: str) -> StreamClaim:
        try:
            return self.streams[stream]
        except KeyError:
            raise BadInput(f"{self.path}: no stream {stream!r} (it has: {', '.join(self.streams)})") from None

    def _guarded(self, read):
        try:
            return read()
        except (OSError, ValueError, RuntimeError) as exc:
            raise BadInput(f"{self.path}: cannot read the file, it is damaged ({first_line(exc)})") from None

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> "Dump":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        streams = ", ".join(f"{n}[{c.width}]" for n, c in self.streams.items())
        return f"Dump({self.path!r}, samples={self.num_samples}, tokens={self.num_tokens}, streams=[{streams}])"


def open_dump(path: str | os.PathLike) -> Dump:
    """Open a dump read-only; raises :class:`BadInput` with a one-line reason when it cannot."""
    return Dump(path)


def _open_hdf5(path: str) -> h5py.File:
    if os.path.isdir(path):
        if path.rstrip("/").endswith(PARTIAL_SUFFIX):
            raise BadInput(f"{path}: an unfinished capture; rerun the capture with --resume to finish it")
        raise BadInput(f"{path}: is a directory, not a dump file (foreign dumps: alignprobe import)")
    if not os.path.exists(path):
        if os.path.isdir(path + PARTIAL_SUFFIX):
            raise BadInput(
                f"{path}: not found, but {path}{PARTIAL_SUFFIX}/ holds an unfinished capture: rerun it with --resume"
            )
        raise BadInput(f"{path}: no such file")
    if not h5py.is_hdf5(path):
        raise BadInput(f"{path}: not an HDF5 file (an alignprobe dump is HDF5; see docs/dump-format.md)")
    try:
        return h5py.File(path, "r")
    except OSError as exc:
        raise BadInput(f"{path}: cannot open the HDF5 file, it is truncated or damaged ({first_line(exc)})") from None


def _as_str(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
