"""Model-Optimizer dumps read in place against `capture hf` of the same prompts.

The files are written as NVIDIA/Model-Optimizer bee497de writes them (not run here: the script needs
modelopt installed): examples/speculative_decoding/collect_hidden_states/compute_hidden_states_hf.py
saves {input_ids, hidden_states: outputs.hidden_states[-1], aux_hidden_states:
cat(outputs.hidden_states[k + 1] for k in ids), loss_mask, conversation_id}; compute_hidden_states_vllm.py
saves hidden_states[:, -1, :] of vLLM's [S, k+1, H] connector tensor (a view) and the rest reshaped.
"""

from __future__ import annotations

import os

import pytest
import torch

from alignprobe.compare import compare
from alignprobe.errors import BadInput
from tests.helpers.foreign_writers import H, N, capture_serve, hf_states, model_and_prompts
from alignprobe.importers import detect_format, open_source

IDS = [1, 3, 4]  # Model-Optimizer HF --aux-layers: outputs of layers 1, 3, 4 = HF[2, 4, 5], what capture hf trains on
VLLM_IDS = [2, 4, 5]  # the same taps in vLLM's numbering


def write_hf_backend(root, ids=IDS):
    _, prompts = model_and_prompts()
    os.makedirs(root, exist_ok=True)
    for i, p in enumerate(prompts):
        hs = hf_states(p.token_ids)
        torch.save({"input_ids": torch.tensor(p.token_ids), "hidden_states": hs[-1].squeeze(0).clone(),
                    "aux_hidden_states": torch.cat([hs[k + 1].squeeze(0) for k in ids], dim=-1),
                    "loss_mask": torch.ones(len(p.token_ids), dtype=torch.long), "conversation_id": i},
                   os.path.join(root, f"{i}.pt"))
    return root


def write_vllm_backend(root, ids=VLLM_IDS):
    """vLLM's numbering (id k = HF[k]) and its final slice, id N, the last layer's pre-norm output."""
    model, prompts = model_and_prompts()
    os.makedirs(root, exist_ok=True)
    pre = {}
    hook = model.model.layers[-1].register_forward_hook(lambda m, a, out: pre.update(x=out[0] if isinstance(out, tuple) else out))
    try:
        for i, p in enumerate(prompts):
            hs = hf_states(p.token_ids)
            connector = torch.stack([hs[k].squeeze(0) for k in ids] + [pre["x"].squeeze(0)], dim=1)  # [S, k+1, H]
            aux = connector[:, :-1, :]
            torch.save({"input_ids": torch.tensor(p.token_ids), "hidden_states": connector[:, -1, :],
                        "aux_hidden_states": aux.reshape(aux.shape[0], -1),
                        "loss_mask": torch.ones(len(p.token_ids), dtype=torch.long), "conversation_id": i},
                       os.path.join(root, f"{i}.pt"))
    finally:
        hook.remove()
    return root


@pytest.fixture(scope="module")
def serve(tmp_path_factory):
    return capture_serve(tmp_path_factory.mktemp("serve"))


def test_hf_backend_passes_and_names_the_backend(tmp_path, serve):
    train = write_hf_backend(str(tmp_path / "hf"))
    assert detect_format(train) == "modelopt"
    with open_source(train, in_place=True, layer_ids=IDS, num_layers=N) as src:
        assert src.streams["aux"].hf_indices == (2, 4, 5)
        assert src.streams["final"].final_norm == "post"
        assert any("modelopt-hf" in n for n in src.plan.notes)
    result = compare(train, serve, train_import={"layer_ids": IDS})
    assert result.verdict == "PASS", [(f.code, f.title) for f in result.findings]


def test_vllm_backend_told_from_storage(tmp_path, serve):
    train = write_vllm_backend(str(tmp_path / "vllm"))
    with open_source(train, in_place=True, layer_ids=VLLM_IDS, num_layers=N) as src:
        assert src.streams["aux"].hf_indices == (2, 4, 5)
        assert src.streams["final"].final_norm == "pre"
    result = compare(train, serve, train_import={"layer_ids": VLLM_IDS})
    assert result.verdict == "PASS", [(f.code, f.title) for f in result.findings]


def test_ids_off_by_one_is_layer_offset(tmp_path, serve):
    train = write_hf_backend(str(tmp_path / "hf"))
    result = compare(train, serve, train_import={"layer_ids": [i - 1 for i in IDS]})  # told 0,2,3: read as HF[1, 3, 4], one layer shallower than they are
    assert result.verdict != "PASS"
    codes = {f.code for f in result.findings}
    # the layers stream, paired by the same wrong claims, measured nothing of its own (index_offset.RULES)
    assert codes == {"layer_offset"}, codes


def test_backend_override_and_refusals(tmp_path):
    train = write_hf_backend(str(tmp_path / "hf"))
    with open_source(train, in_place=True, layer_ids=IDS, num_layers=N, system="modelopt-vllm") as src:
        assert src.streams["aux"].hf_indices == (1, 3, 4)
    with pytest.raises(BadInput, match="--layer-ids"):
        open_source(train, in_place=True, num_layers=N)
    odd = str(tmp_path / "odd")
    os.makedirs(odd)
    big = torch.zeros(5, 4 * H)
    torch.save({"input_ids": torch.arange(5), "hidden_states": big[:, 8:8 + H], "aux_hidden_states": torch.zeros(5, 3 * H),
                "loss_mask": torch.ones(5, dtype=torch.long), "conversation_id": 0}, os.path.join(odd, "0.pt"))
    with pytest.raises(BadInput, match="--system modelopt-hf or modelopt-vllm"):
        open_source(odd, in_place=True, layer_ids=IDS, num_layers=N)
