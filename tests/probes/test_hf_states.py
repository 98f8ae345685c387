"""forward_states: hooks keep exactly the tensors output_hidden_states returns, and only those asked for."""

from __future__ import annotations

import pytest
import torch

from alignprobe.demo.tiny_models import tiny_deepseek_v3, tiny_llama
from alignprobe.probes.hf_states import forward_states


@pytest.fixture(scope="module", params=["llama", "deepseek"])
def model(request):
    return tiny_llama(num_layers=6) if request.param == "llama" else tiny_deepseek_v3(num_layers=6)


def test_hooked_states_are_output_hidden_states_bit_for_bit(model):
    ids = torch.randint(0, 500, (2, 17), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ref = model(input_ids=ids, output_hidden_states=True, use_cache=False).hidden_states
    fs = forward_states(model, ids)
    assert sorted(fs.hf) == list(range(len(ref))) and fs.num_layers == len(ref) - 1
    for k, tensor in enumerate(ref):
        assert torch.equal(fs.hf[k], tensor), k
    assert torch.equal(model.model.norm(fs.final_prenorm), ref[-1])


def test_only_the_kept_indices_come_back(model):
    ids = torch.randint(0, 500, (1, 9), generator=torch.Generator().manual_seed(1))
    full = forward_states(model, ids)
    some = forward_states(model, ids, keep=[2, 3, 6])
    assert sorted(some.hf) == [2, 3, 6]
    for k in some.hf:
        assert torch.equal(some.hf[k], full.hf[k])
    assert torch.equal(some.final_prenorm, full.final_prenorm)
