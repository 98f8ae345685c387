"""DeepSpec's target cache: one folder of ``manifest.json``, ``samples.idx`` and ``shard-*.bin``.

Read from DeepSpec's source (deepseek-ai/DeepSpec): scripts/data/prepare_target_cache.py (commit
1bcc590c) and deepspec/data/target_cache_dataset.py (commit 4351696e, TARGET_CACHE_VERSION 2):
- ``manifest.json`` holds ``version`` 2, ``num_samples``, ``target_layer_ids`` (ascending),
  ``hidden_size``, ``hidden_dtype`` (bfloat16, or float8_e4m3fn / float8_e5m2 without a scale),
  ``token_dtype`` int32, ``mask_dtype`` uint8, ``index_record_size`` 56 and ``shards`` (file names);
- ``samples.idx`` is one little-endian ``<QIIQQQQQ`` record a sample (sample_id, shard_id, seq_len,
  then the byte offsets of input_ids, attention_mask, loss_mask, target_hidden_states and
  target_last_hidden_states in that shard), sample ids dense from 0;
- a shard stores each sample's arrays back to back: input_ids int32 [S], attention_mask and loss_mask
  uint8 [S], target_hidden_states [S, k*H] and target_last_hidden_states [S, H] in hidden_dtype.
deepspec/modeling/target_extract.py takes id k as the output of decoder layer k (a forward hook on
``layers[k]``: HF[k+1], the pre-norm output for k = N-1) and id -1 as the embedding output (HF[0]);
the last state is the backbone's ``last_hidden_state``: post-norm.
"""

from __future__ import annotations

import functools
import os

import numpy as np
import torch

from alignprobe.dump.schema import FINAL_NORM_POST
from alignprobe.errors import BadInput, first_line
from alignprobe.importers.layout import Layout, SampleRef
from alignprobe.importers.sample import ForeignSample
from alignprobe.safe_json import load_json_file

MANIFEST, INDEX = "manifest.json", "samples.idx"
VERSION = 2
RECORD = np.dtype([("sample_id", "<u8"), ("shard_id", "<u4"), ("seq_len", "<u4"), ("input_ids", "<u8"),
                   ("attention_mask", "<u8"), ("loss_mask", "<u8"), ("hidden", "<u8"), ("last", "<u8")])
HIDDEN_DTYPES = {"bfloat16": torch.bfloat16, "float8_e4m3fn": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2}


@functools.lru_cache(maxsize=8)
def _manifest(folder: str, stamp: tuple[int, int]) -> dict:
    path = os.path.join(folder, MANIFEST)
    try:
        manifest = load_json_file(path, "DeepSpec manifest")
    except BadInput as exc:
        raise BadInput(f"not a readable DeepSpec manifest: {first_line(exc)}") from None
    required = {"version", "num_samples", "target_layer_ids", "hidden_size", "hidden_dtype", "token_dtype",
                "mask_dtype", "index_record_size", "shards"}
    missing = sorted(required - set(manifest)) if isinstance(manifest, dict) else sorted(required)
    if missing:
        raise BadInput(f"{path}: a DeepSpec target-cache manifest without {', '.join(missing)}")
    if int(manifest["version"]) != VERSION or int(manifest["index_record_size"]) != RECORD.itemsize:
        raise BadInput(f"{path}: target-cache version {manifest['version']} with {manifest['index_record_size']}-byte "
                       f"records; alignprobe reads version {VERSION} ({RECORD.itemsize}-byte records)")
    if manifest["hidden_dtype"] not in HIDDEN_DTYPES or manifest["token_dtype"] != "int32" \
            or manifest["mask_dtype"] != "uint8":
        raise BadInput(f"{path}: dtypes {manifest['hidden_dtype']}/{manifest['token_dtype']}/{manifest['mask_dtype']} "
                       f"are not DeepSpec's ({'/'.join(HIDDEN_DTYPES)} states, int32 tokens, uint8 masks)")
    return manifest


def manifest_of(folder: str) -> dict:
    st = os.stat(os.path.join(folder, MANIFEST))
    return _manifest(folder, (st.st_size, st.st_mtime_ns))


@functools.lru_cache(maxsize=8)
def _mapped(path: str, stamp: tuple[int, int], dtype) -> np.ndarray:
    """A file of the cache mapped once (the index, a shard), not again for each sample read from it."""
    return np.memmap(path, dtype=dtype, mode="r")


def _map(path: str, dtype) -> np.ndarray:
    try:
        st = os.stat(path)
        return _mapped(path, (st.st_size, st.st_mtime_ns), dtype) if st.st_size else np.zeros(0, dtype)
    except (OSError, ValueError) as exc:
        raise BadInput(f"{path}: cannot map the file ({exc})") from None


def _index(folder: str) -> np.ndarray:
    path = os.path.join(folder, INDEX)
    if not os.path.isfile(path):
        raise BadInput(f"{folder}: a DeepSpec manifest without its {INDEX}")
    size = os.path.getsize(path)
    if size % RECORD.itemsize:
        raise BadInput(f"{path}: {size} bytes, not a whole number of {RECORD.itemsize}-byte records")
    return _map(path, RECORD)


def _take(ref: SampleRef, shard: np.ndarray, offset, count: int, np_dtype) -> np.ndarray:
    """``count`` values of ``np_dtype`` at byte ``offset`` of the shard, checked to lie inside it."""
    start, stop = int(offset), int(offset) + count * np.dtype(np_dtype).itemsize
    if stop > len(shard):
        raise BadInput(f"{ref}: its arrays run past the end of the shard ({stop} > {len(shard)} bytes)")
    return np.frombuffer(shard, dtype=np_dtype, count=count, offset=start)


class DeepSpecLayout(Layout):
    name = "deepspec"
    described = "DeepSpec target cache (manifest.json, samples.idx, shard-*.bin)"
    final_norm = FINAL_NORM_POST
    negative_ids = (-1,)
    read_ahead = False  # a shard holds up to 64 GB of samples: a sample's rows are mapped, not its file read

    def files(self, path: str) -> list[str]:
        folder = path if os.path.isdir(path) else os.path.dirname(path) if os.path.basename(path) == MANIFEST else None
        return [os.path.join(folder, MANIFEST)] if folder and os.path.isfile(os.path.join(folder, MANIFEST)) else []

    def samples(self, path: str, files: list[str]) -> list[SampleRef]:
        folder = os.path.dirname(files[0])
        manifest, index = manifest_of(folder), _index(folder)
        if len(index) != int(manifest["num_samples"]):
            raise BadInput(f"{folder}: {INDEX} holds {len(index)} records but the manifest says {manifest['num_samples']}")
        shards = [os.path.join(folder, s["file_name"]) for s in manifest["shards"]]
        row = 6 + (len(manifest["target_layer_ids"]) + 1) * int(manifest["hidden_size"]) * \
            HIDDEN_DTYPES[manifest["hidden_dtype"]].itemsize
        refs = []
        for i, record in enumerate(index):
            shard = int(record["shard_id"])
            if int(record["sample_id"]) != i or shard >= len(shards):
                raise BadInput(f"{folder}/{INDEX}: record {i} names sample {record['sample_id']} in shard {shard} "
                               f"(the manifest lists {len(shards)} shards)")
            refs.append(SampleRef(shards[shard], i, int(record["seq_len"]) * row))
        return refs

    def read(self, ref: SampleRef, mmap: bool = True, strict: bool = True) -> ForeignSample:
        manifest, record, shard = _located(ref)
        tokens, mask = _tokens_and_mask(ref, record, shard)
        length, hidden, slices = len(tokens), int(manifest["hidden_size"]), len(manifest["target_layer_ids"])
        dtype = HIDDEN_DTYPES[manifest["hidden_dtype"]]
        bits = np.uint16 if dtype.itemsize == 2 else np.uint8
        aux = torch.from_numpy(_take(ref, shard, record["hidden"], length * slices * hidden, bits).copy()).view(dtype)
        last = torch.from_numpy(_take(ref, shard, record["last"], length * hidden, bits).copy()).view(dtype)
        return ForeignSample(str(ref), ref.record, tokens, mask, aux.reshape(length, slices * hidden),
                             last.reshape(length, hidden), hidden,
                             storage="" if dtype == torch.bfloat16 else str(dtype).replace("torch.", ""),
                             layout=self.name)

    def read_tokens(self, ref: SampleRef):
        _, record, shard = _located(ref)
        return _tokens_and_mask(ref, record, shard)

    def stored_ids(self, source: str) -> list[int] | None:
        folder = source if os.path.isdir(source) else os.path.dirname(source)
        return [int(i) for i in manifest_of(folder)["target_layer_ids"]]


def _located(ref: SampleRef):
    """The manifest, the sample's index record and its mapped shard."""
    folder = os.path.dirname(ref.path)
    return manifest_of(folder), _index(folder)[ref.record], _map(ref.path, np.uint8)


def _tokens_and_mask(ref: SampleRef, record, shard: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    length = int(record["seq_len"])
    tokens = _take(ref, shard, record["input_ids"], length, np.int32).astype(np.int64)
    return tokens, (_take(ref, shard, record["loss_mask"], length, np.uint8) != 0).astype(np.int64)


LAYOUT = DeepSpecLayout()
