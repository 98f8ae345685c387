"""simulate_weight_quant against an element-by-element reference computed another way."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from alignprobe.errors import BadInput
from alignprobe.quant import fake_quantize, simulate_weight_quant
from alignprobe.demo.tiny_models import tiny_deepseek_v3, tiny_llama


def reference_int_rtn(w: np.ndarray, qmax: int, group_size: int) -> np.ndarray:
    """Plain loops: every group of input columns gets scale max|w|/qmax, values round half to even."""
    out = np.empty_like(w, dtype=np.float64)
    rows, cols = w.shape
    for r in range(rows):
        for start in range(0, cols, group_size):
            group = w[r, start : start + group_size].astype(np.float64)
            scale = max(abs(group).max(), 1e-12) / qmax
            out[r, start : start + group_size] = np.clip(np.rint(group / scale), -qmax - 1, qmax) * scale
    return out


def e4m3_grid() -> np.ndarray:
    """Every finite float8 e4m3fn value, from its bit layout (1 sign, 4 exponent bias 7, 3 mantissa)."""
    values = []
    for exponent in range(16):
        for mantissa in range(8):
            if exponent == 15 and mantissa == 7:
                continue  # the NaN pattern; e4m3fn has no infinities
            if exponent == 0:
                v = (mantissa / 8) * 2.0 ** (1 - 7)
            else:
                v = (1 + mantissa / 8) * 2.0 ** (exponent - 7)
            values += [v, -v]
    return np.unique(values)


def test_e4m3_grid_is_what_the_format_says():
    grid = e4m3_grid()
    assert grid.max() == 448.0 and len(grid) == 253  # 254 finite patterns, +0 and -0 merge


@pytest.mark.parametrize("scheme,qmax", [("int4", 7), ("int8", 127)])
@pytest.mark.parametrize("group_size", [4, 16, 7])  # 7 leaves a short last group of 40 columns
def test_int_schemes_match_loop_reference(scheme, qmax, group_size):
    g = torch.Generator().manual_seed(1)
    w = torch.randn(6, 40, generator=g) * torch.linspace(0.1, 3, 40)
    got = fake_quantize(w, scheme, group_size).numpy()
    want = reference_int_rtn(w.numpy(), qmax, group_size)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    # every value of a group is an integer multiple of its scale, at most 2*qmax+1 levels
    first = got[0, :group_size] / (abs(w[0, :group_size]).max().item() / qmax)
    np.testing.assert_allclose(first, np.rint(first), atol=1e-4)
    assert len(np.unique(np.rint(first))) <= 2 * qmax + 1


def test_fp8_is_nearest_e4m3_value_times_a_per_channel_scale():
    g = torch.Generator().manual_seed(2)
    w = torch.randn(5, 33, generator=g) * 0.02
    got = fake_quantize(w, "fp8").numpy().astype(np.float64)
    grid = e4m3_grid()
    for r in range(w.shape[0]):
        scale = abs(w[r].numpy()).max() / 448.0
        scaled = w[r].numpy().astype(np.float64) / scale
        nearest = grid[np.abs(scaled[:, None] - grid[None, :]).argmin(axis=1)]
        np.testing.assert_allclose(got[r], nearest * scale, rtol=1e-6, atol=0)


def test_input_dim_groups_run_along_the_reduction_axis():
    g = torch.Generator().manual_seed(3)
    w = torch.randn(3, 8, 12, generator=g)  # [experts, in, out] as a transposed expert tensor stores it
    got = fake_quantize(w, "int4", 4, input_dim=-2)
    for e in range(3):
        want = reference_int_rtn(w[e].T.numpy(), 7, 4).T
        np.testing.assert_allclose(got[e].numpy(), want, rtol=1e-6, atol=1e-7)


def test_bfloat16_weights_stay_bfloat16():
    w = torch.randn(4, 32).to(torch.bfloat16)
    assert fake_quantize(w, "int4", 8).dtype == torch.bfloat16


@pytest.fixture(scope="module")
def deepseek_pair():
    original = tiny_deepseek_v3(num_layers=3)
    quantized = simulate_weight_quant(tiny_deepseek_v3(num_layers=3), "int4", group_size=16)
    return original, quantized


def test_deepseek_decoder_weights_and_experts_are_rounded_the_rest_untouched(deepseek_pair):
    original, quantized = deepseek_pair
    before = dict(original.named_parameters())
    changed = {n for n, p in quantized.named_parameters() if not torch.equal(p, before[n])}
    assert "model.layers.1.mlp.experts.gate_up_proj" in changed
    assert "model.layers.1.mlp.experts.down_proj" in changed
    assert "model.layers.0.self_attn.q_a_proj.weight" in changed
    assert "model.layers.1.mlp.shared_experts.down_proj.weight" in changed
    for kept in ("model.embed_tokens.weight", "lm_head.weight", "model.norm.weight", "model.layers.1.mlp.gate.weight"):
        assert kept not in changed
    assert not any("layernorm" in n for n in changed)
    # expert tensors [E, out, in]: groups along the last axis, as F.linear(x, W[e]) reduces over it
    w_before = before["model.layers.1.mlp.experts.down_proj"].detach()
    w_after = dict(quantized.named_parameters())["model.layers.1.mlp.experts.down_proj"].detach()
    np.testing.assert_allclose(w_after[2].numpy(), reference_int_rtn(w_before[2].numpy(), 7, 16), rtol=1e-6, atol=1e-7)
    assert quantized.alignprobe_quantization.tensors == len(changed)
    assert quantized.alignprobe_quantization.label == "int4-w4a16-g16 (simulated RTN)"


def test_quantized_model_drifts_a_little_not_a_lot(deepseek_pair):
    original, quantized = deepseek_pair
    ids = torch.arange(3, 40).unsqueeze(0)
    with torch.no_grad():
        a = original(input_ids=ids, output_hidden_states=True).hidden_states[-1]
        b = quantized(input_ids=ids, output_hidden_states=True).hidden_states[-1]
    cos = torch.nn.functional.cosine_similarity(a, b, dim=-1)
    assert 0.9 < cos.mean().item() < 0.99999


def test_quantization_is_idempotent():
    model = simulate_weight_quant(tiny_llama(num_layers=2), "int8", group_size=32)
    once = {n: p.clone() for n, p in model.named_parameters()}
    simulate_weight_quant(model, "int8", group_size=32)
    for n, p in model.named_parameters():
        torch.testing.assert_close(p, once[n], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("scheme,group_size", [("int3", 128), ("int4", 0), ("int8", -5)])
def test_bad_settings_are_bad_input(scheme, group_size):
    with pytest.raises(BadInput):
        simulate_weight_quant(tiny_llama(num_layers=1), scheme, group_size)


def test_model_without_decoder_layers_is_bad_input():
    with pytest.raises(BadInput, match="decoder layers"):
        simulate_weight_quant(torch.nn.Sequential(torch.nn.Linear(4, 4)), "int4")
