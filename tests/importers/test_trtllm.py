"""TensorRT-LLM SaveState files read in place against `capture hf` of the same prompts.

TensorRT-LLM needs a GPU build, so the files are written here as its writer writes them
(NVIDIA/TensorRT-LLM tensorrt_llm/_torch/speculative/save_hidden_state.py, commit 3e906a0e, and the
resource manager of later versions): every ``write_interval`` requests one ``torch.save`` of a list of
``{"id", "input_ids", "hidden_state", "aux_hidden_states"}`` to ``{prefix}_{iter}.pt``. The capture
buffer holds ``hidden_states + residual`` after each captured decoder layer k (HF[k+1]), in ascending
id order, then id -1, the post-norm final; the aux tensor keeps the -1 slice only when -1 was
configured explicitly.
"""

from __future__ import annotations

import os

import pytest
import torch

from alignprobe.audit import audit
from alignprobe.compare import compare
from alignprobe.errors import BadInput
from tests.helpers.foreign_writers import H, N, capture_serve, hf_states, model_and_prompts
from alignprobe.importers import detect_format, import_source, open_source

IDS = [1, 3, 4]  # outputs of layers 1, 3, 4 = HF[2, 4, 5]: what capture hf's eagle3 view holds for N=8


def write_save_state(root, ids=IDS, explicit_final=False, interval=2, aux_key="aux_hidden_states"):
    """What SaveHiddenStatesDrafter writes for the prompts (ids in any order: the buffer is sorted)."""
    _, prompts = model_and_prompts()
    os.makedirs(root, exist_ok=True)
    records, written = [], []
    for it, p in enumerate(prompts, start=1):
        hs = hf_states(p.token_ids)
        buffer = torch.cat([hs[k + 1][0] for k in sorted(ids)] + [hs[-1][0]], dim=-1)  # [S, (k+1)*H]
        record = {"id": it, "input_ids": torch.tensor(p.token_ids, dtype=torch.long), "hidden_state": buffer[:, -H:].clone()}
        record[aux_key] = buffer.clone() if explicit_final else buffer[:, :-H].clone()
        records.append(record)
        if it % interval == 0 or it == len(prompts):  # (the real writer flushes the rest at shutdown, if at all)
            path = os.path.join(root, f"data_{it}.pt")
            torch.save(records, path)
            written.append(path)
            records = []
    return root


@pytest.fixture(scope="module")
def serve(tmp_path_factory):
    return capture_serve(tmp_path_factory.mktemp("serve"))


def test_records_of_several_files_pass_against_capture_hf(tmp_path, serve):
    train = write_save_state(str(tmp_path / "trt"))
    assert detect_format(train) == "trtllm"
    with open_source(train, in_place=True, layer_ids=IDS, num_layers=N) as src:
        assert src.num_samples == 6 and len(src.plan.files) == 3  # 2 + 2 + 2 records
        assert src.streams["aux"].hf_indices == (2, 4, 5)
        assert src.streams["final"].final_norm == "post"
    result = compare(train, serve, train_import={"layer_ids": IDS})
    assert result.verdict == "PASS", [(f.code, f.title) for f in result.findings]


def test_save_state_as_the_serve_side(tmp_path, serve):
    # TensorRT-LLM is a serving engine: what its SaveState mode wrote is what it would feed the drafter
    trt = write_save_state(str(tmp_path / "trt"))
    result = compare(serve, trt, serve_import={"layer_ids": IDS})
    assert result.verdict == "PASS", [(f.code, f.title) for f in result.findings]


def test_defaults_explicit_final_and_id_order(tmp_path, serve):
    # ids given out of order are read in the buffer's ascending order; -1 configured explicitly keeps
    # the post-norm final as the aux tensor's last slice, read as the final state
    train = write_save_state(str(tmp_path / "trt"), explicit_final=True, aux_key="hidden_state_features")
    with open_source(train, in_place=True, layer_ids=[4, 1, 3, -1], num_layers=N) as src:
        assert src.plan.layer_ids == (1, 3, 4) and src.streams["aux"].hf_indices == (2, 4, 5)
        assert src.plan.final_from_tail and any("ascending" in n for n in src.plan.notes)
    result = compare(train, serve, train_import={"layer_ids": [4, 1, 3, -1]})
    assert result.verdict == "PASS", [(f.code, f.title) for f in result.findings]
    # no ids: TensorRT-LLM's default (1, N//2-1, N-4) = (1, 3, 4) for N=8
    with open_source(write_save_state(str(tmp_path / "d")), in_place=True, num_layers=N) as src:
        assert src.plan.layer_ids == (1, 3, 4)


def test_import_and_audit_read_each_record(tmp_path):
    train = write_save_state(str(tmp_path / "trt"))
    result = import_source(train, tmp_path / "t.h5", layer_ids=IDS, num_layers=N, progress=False)
    assert result.samples == 6
    report = audit([train])
    assert report.sources[0].format == "trtllm"
    assert not [f for f in report.findings if f.code == "unreadable"], report.findings


def test_ids_one_off_are_a_layer_offset(tmp_path, serve):
    train = write_save_state(str(tmp_path / "trt"))
    result = compare(train, serve, train_import={"layer_ids": [2, 4, 5]})  # vLLM's numbering given for TRT-LLM files
    assert "layer_offset" in {f.code for f in result.findings}


def test_refusals(tmp_path):
    train = write_save_state(str(tmp_path / "trt"))
    with pytest.raises(BadInput, match="3 layer slices"):
        open_source(train, in_place=True, layer_ids=[1, 3], num_layers=N)
    with pytest.raises(BadInput, match="non-negative"):
        open_source(train, in_place=True, layer_ids=[1, 3, -2], num_layers=N)
    odd = tmp_path / "odd"
    odd.mkdir()
    torch.save([{"id": 1, "input_ids": torch.arange(4)}], odd / "data_1.pt")
    with pytest.raises(BadInput, match="expected one of"):
        open_source(str(odd), in_place=True, layer_ids=IDS, num_layers=N)
