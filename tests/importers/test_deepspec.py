"""DeepSpec target caches read in place against `capture hf` of the same prompts.

The cache is written here as deepseek-ai/DeepSpec writes it (deepspec/data/target_cache_dataset.py,
commit 4351696e: LocalTargetCacheWriter, build_target_cache_manifest; not run here: the script needs
torch.distributed and a CUDA device per rank): shards of back-to-back arrays (input_ids int32,
attention_mask and loss_mask uint8, target_hidden_states and target_last_hidden_states bfloat16), one
little-endian ``<QIIQQQQQ`` index record a sample, and a manifest that records the layer ids. The
states are what deepspec/modeling/target_extract.py hooks: the output of ``layers[k]`` for id k, the
embedding output for -1, the backbone's post-norm ``last_hidden_state``.
"""

from __future__ import annotations

import json
import os
import struct

import numpy as np
import pytest
import torch

from alignprobe.audit import audit
from alignprobe.compare import compare
from alignprobe.errors import BadInput
from tests.helpers.foreign_writers import H, N, capture_serve, hf_states, model_and_prompts
from alignprobe.importers import detect_format, import_source, open_source

IDS = [1, 3, 4]  # outputs of layers 1, 3, 4 = HF[2, 4, 5]: capture hf's eagle3 view for N=8


def _bf16_bytes(t: torch.Tensor) -> bytes:
    return t.to(torch.bfloat16).contiguous().view(torch.uint16).numpy().tobytes()


def write_target_cache(root, ids=IDS, samples_per_shard=3, manifest_ids=None):
    _, prompts = model_and_prompts()
    os.makedirs(root, exist_ok=True)
    index, shards, shard, handle = bytearray(), [], -1, None
    for i, p in enumerate(prompts):
        if i % samples_per_shard == 0:
            if handle:
                handle.close()
            shard += 1
            shards.append({"shard_id": shard, "file_name": f"shard-{shard:05d}.bin"})
            handle = open(os.path.join(root, shards[-1]["file_name"]), "wb")
        hs = hf_states(p.token_ids)
        arrays = [np.asarray(p.token_ids, dtype=np.int32).tobytes(), bytes([1]) * len(p.token_ids),
                  bytes([0, 0] + [1] * (len(p.token_ids) - 2)),
                  _bf16_bytes(torch.cat([hs[k + 1][0] for k in ids], dim=-1)), _bf16_bytes(hs[-1][0])]
        offsets = []
        for data in arrays:
            offsets.append(handle.tell())
            handle.write(data)
        index += struct.pack("<QIIQQQQQ", i, shard, len(p.token_ids), *offsets)
    handle.close()
    with open(os.path.join(root, "samples.idx"), "wb") as fh:
        fh.write(index)
    manifest = {"version": 2, "num_samples": len(prompts), "num_shards": len(shards),
                "target_layer_ids": manifest_ids or ids, "hidden_dtype": "bfloat16", "token_dtype": "int32",
                "mask_dtype": "uint8", "index_record_size": 56, "hidden_size": H, "shards": shards,
                "target_model_name_or_path": "tiny"}
    with open(os.path.join(root, "manifest.json"), "w") as fh:
        json.dump(manifest, fh)
    return root


@pytest.fixture(scope="module")
def serve(tmp_path_factory):
    return capture_serve(tmp_path_factory.mktemp("serve"))


def test_cache_passes_against_capture_hf_with_its_own_ids(tmp_path, serve):
    train = write_target_cache(str(tmp_path / "cache"))
    assert detect_format(train) == "deepspec"
    with open_source(train, in_place=True, num_layers=N) as src:
        assert src.num_samples == 6 and len(src.plan.files) == 2
        assert src.plan.layer_ids == (1, 3, 4) and src.streams["aux"].hf_indices == (2, 4, 5)
        assert src.streams["final"].final_norm == "post" and src.streams["aux"].dtype == "bfloat16"
        first = src.token_ids(0)
    assert len(first) and first.dtype == np.int64
    result = compare(train, serve)
    assert result.verdict == "PASS", [(f.code, f.title) for f in result.findings]


def test_embedding_id_and_final_layer(tmp_path):
    # -1 is the embedding output (HF[0]); N-1, the last layer's output, is HF[N] before the final norm
    train = write_target_cache(str(tmp_path / "cache"), ids=[-1, 3, N - 1])
    with open_source(train, in_place=True, num_layers=N) as src:
        assert src.streams["aux"].hf_indices == (0, 4, N)
        assert src.streams["aux"].final_norm == "pre"


def test_import_and_audit(tmp_path):
    train = write_target_cache(str(tmp_path / "cache"))
    assert import_source(train, tmp_path / "c.h5", num_layers=N, progress=False).samples == 6
    report = audit([train])
    assert report.sources[0].format == "deepspec"
    assert not [f for f in report.findings if f.code == "unreadable"], report.findings


def test_refusals(tmp_path):
    train = write_target_cache(str(tmp_path / "cache"))
    with pytest.raises(BadInput, match="record layer ids"):
        open_source(train, in_place=True, layer_ids=[2, 4, 5], num_layers=N)
    with open(os.path.join(train, "samples.idx"), "ab") as fh:
        fh.write(b"\0" * 10)
    with pytest.raises(BadInput, match="whole number"):
        open_source(train, in_place=True, num_layers=N)
    broken = write_target_cache(str(tmp_path / "b"))
    os.truncate(os.path.join(broken, "shard-00001.bin"), 100)
    with pytest.raises(BadInput, match="past the end"):
        import_source(broken, tmp_path / "b.h5", num_layers=N, progress=False)


@pytest.mark.parametrize("text, said", [("{\"version\": NaN}", "NaN"), ("[" * 100_000 + "]" * 100_000, "nested"),
                                        ("{\"version\": 1e999}", "1e999"), ("{", "not JSON")])
def test_a_manifest_that_is_not_plain_json_is_one_line(tmp_path, text, said):
    train = write_target_cache(str(tmp_path / "cache"))
    with open(os.path.join(train, "manifest.json"), "w") as fh:
        fh.write(text)
    with pytest.raises(BadInput, match="not a readable DeepSpec manifest") as info:
        open_source(train, in_place=True, num_layers=N)
    assert said in str(info.value)
