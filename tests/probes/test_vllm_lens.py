"""The vllm-lens reader on arrays in its layout (vllm-lens pins vllm 0.30 and does not install here).

Layout, measured on a real run (REAL_ENGINES.md): ``residual_stream`` [L, S, H], layer-major; entry k
is the output of layer k = HF[k+1]; the last is the final state before the norm.
"""

import numpy as np
import pytest
import torch

from alignprobe.compare.compare import compare
from alignprobe.demo.tiny_models import synthetic_corpus, tiny_llama
from alignprobe.dump import open_dump
from alignprobe.errors import BadInput
from alignprobe.probes.hf import capture_hf
from alignprobe.probes.hf_states import forward_states
from alignprobe.probes.prompts import Prompt
from alignprobe.probes.vllm_lens import capture_vllm_lens

N, H = 6, 64


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    model = tiny_llama(num_layers=N, hidden_size=H, seed=4)
    with torch.no_grad():
        model.model.norm.weight.uniform_(0.5, 1.5)  # the final norm is more than a per-token scale
    corpus = synthetic_corpus(3, 16, seed=2)
    prompts = [Prompt(f"p{i}", corpus[i, :n].tolist()) for i, n in enumerate([16, 9, 4])]
    train = capture_hf(model, prompts, tmp_path_factory.mktemp("t") / "train.h5", progress=False)
    return model, prompts, train


def lens_layout(model, token_ids):
    """What vllm-lens returns: [L, S, H], entry k = output of layer k; the last one pre-norm."""
    with torch.no_grad():
        fs = forward_states(model, torch.tensor([token_ids]))
    outputs = [fs.hf[k + 1][0] for k in range(N - 1)] + [fs.final_prenorm[0]]
    return torch.stack(outputs, dim=0)


def test_lens_layout_claims_hf_k_plus_1_and_passes(setup, tmp_path):
    model, prompts, train = setup
    samples = [(p.sample_id, p.token_ids, lens_layout(model, p.token_ids)) for p in prompts]
    out = capture_vllm_lens(samples, tmp_path / "lens.h5", num_layers=N, hidden_size=H)
    with open_dump(out) as dump:
        claim = dump.streams["residual_stream"]
        assert list(claim.hf_indices) == list(range(1, N + 1)) and claim.final_norm == "pre"
        first = dump.states("p0", "residual_stream")
        np.testing.assert_array_equal(first[:, :H], samples[0][2][0].numpy())  # slice 0 = entry 0
    result = compare(train, out)
    assert result.verdict == "PASS", [(f.code, f.title) for f in result.findings]


def test_a_token_major_array_is_refused(setup, tmp_path):
    model, prompts, _ = setup
    wrong = lens_layout(model, prompts[0].token_ids).transpose(0, 1)  # [S, L, H]: the extract_hidden_states layout
    with pytest.raises(BadInput, match=r"\[layers, tokens, hidden\]"):
        capture_vllm_lens([("p0", prompts[0].token_ids, wrong)], tmp_path / "x.h5", num_layers=N, hidden_size=H)
