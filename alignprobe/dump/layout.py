"""The HDF5 layout of a dump, in one place (docs/dump-format.md describes the same thing).

    /                      attrs: format, format_version, provenance (JSON), complete
    /samples/ids           [S] UTF-8 strings, unique: how two dumps pair their samples
    /samples/offsets       [S+1] int64: sample i holds flat tokens offsets[i]..offsets[i+1]
    /tokens                [T] int64 token ids, all samples back to back
    /streams/<name>        [T, width] states; attrs: the StreamClaim fields and the encoding
"""

from __future__ import annotations

import os

import h5py
import numpy as np

from alignprobe.dump.encoding import STORAGE_DTYPE, encoding_of
from alignprobe.dump.room import check_room, dump_bytes
from alignprobe.dump.schema import BASE_FORMAT_VERSION, FORMAT_NAME, Provenance, StreamClaim

# About 1 MiB a chunk, one hidden-size slice wide: reading a block of tokens touches whole chunks,
# and a reader that wants one slice (one HF index) of a wide stream touches only that slice's chunks.
CHUNK_BYTES = 1 << 20

STR = h5py.string_dtype("utf-8")


def chunk_shape(claim: StreamClaim) -> tuple[int, int]:
    itemsize = np.dtype(STORAGE_DTYPE[claim.dtype]).itemsize
    columns = min(claim.hidden_size, claim.width)
    rows = max(1, CHUNK_BYTES // (columns * itemsize))
    return rows, columns


def create_file(
    path: str,
    provenance: Provenance,
    streams: dict[str, StreamClaim],
    sample_ids: list[str],
    offsets: np.ndarray,
    *,
    preallocated: bool = False,
) -> h5py.File:
    """Create a dump with every dataset sized for ``offsets[-1]`` tokens; the caller fills in states.

    ``complete`` stays False until the caller sets it, so a file cut short reads as unfinished.
    ``preallocated``: tokens and streams are contiguous and their space is allocated now (never
    filled), so each has a fixed file offset that raw writes can target (dump/planned_writer.py).
    """
    num_tokens = int(offsets[-1])
    # HDF5 that runs out of room mid-write can crash (SIGSEGV) instead of raising: check first (room.py)
    check_room(os.path.dirname(os.path.abspath(path)), dump_bytes(streams, num_tokens), os.fspath(path))
    f = h5py.File(path, "w", libver="latest")
    f.attrs["format"] = FORMAT_NAME
    f.attrs["format_version"] = BASE_FORMAT_VERSION  # 2 once marks are written (dump/marks.py)
    f.attrs["provenance"] = provenance.to_json()
    f.attrs["complete"] = False
    f.create_dataset("samples/ids", data=np.array(sample_ids, dtype=object), dtype=STR)
    f.create_dataset("samples/offsets", data=np.asarray(offsets, dtype=np.int64))
    f.create_dataset("tokens", shape=(num_tokens,), dtype=np.int64, **_placement(preallocated, None))
    for name, claim in streams.items():
        rows, columns = chunk_shape(claim)
        ds = f.create_dataset(
            f"streams/{name}",
            shape=(num_tokens, claim.width),
            dtype=STORAGE_DTYPE[claim.dtype],
            **_placement(preallocated, (min(rows, max(1, num_tokens)), columns)),
        )
        write_claim(ds, claim)
    return f


def _placement(preallocated: bool, chunks) -> dict:
    if not preallocated:
        return {"chunks": chunks}
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_layout(h5py.h5d.CONTIGUOUS)
    dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
    dcpl.set_fill_time(h5py.h5d.FILL_TIME_NEVER)
    return {"dcpl": dcpl}


def write_claim(ds: h5py.Dataset, claim: StreamClaim) -> None:
    ds.attrs["hf_indices"] = np.asarray(claim.hf_indices, dtype=np.int64)
    ds.attrs["hidden_size"] = claim.hidden_size
    ds.attrs["num_layers"] = claim.num_layers
    ds.attrs["dtype"] = claim.dtype
    ds.attrs["encoding"] = encoding_of(claim.dtype)
    ds.attrs["final_norm"] = claim.final_norm
    ds.attrs["role"] = claim.role
    ds.attrs["note"] = claim.note
