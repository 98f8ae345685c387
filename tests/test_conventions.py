"""Each convention against a hand-worked example from the source it was read from (conventions.SOURCES)."""

import pytest

from alignprobe.conventions import (
    NO_DEFAULT_IDS,
    SOURCES,
    default_layer_ids,
    eagle3_hf_indices,
    map_layer_ids,
    shift_explanations,
)
from alignprobe.dump.schema import FINAL_NORM_POST, FINAL_NORM_PRE
from alignprobe.errors import BadInput

# DeepSeek-V3 / Kimi-K2.x: 61 decoder layers, hidden size 7168.
N_DSV3 = 61


def test_specforge_deepseek_v3_ids_read_one_layer_apart_by_sglang_and_vllm():
    # SpecForge configs/deepseek-v3-671b-eagle3.json ships eagle_aux_hidden_state_layer_ids [1, 29, 57].
    ids = [1, 29, 57]
    sglang = map_layer_ids("sglang", ids, N_DSV3, arch="deepseek_v3")
    vllm = map_layer_ids("vllm", ids, N_DSV3)
    assert sglang.hf_indices == (2, 30, 58)
    assert vllm.hf_indices == (1, 29, 57)
    assert [s - v for s, v in zip(sglang.hf_indices, vllm.hf_indices)] == [1, 1, 1]


def test_sglang_llama_adds_one_to_every_explicit_id():
    # llama.py: layers_to_capture = [val + 1 for val in layer_ids]; captured before layer i -> HF[i].
    m = map_layer_ids("sglang", [2, 16, 29], 32)
    assert m.hf_indices == (3, 17, 30)
    assert m.final_norm == FINAL_NORM_POST


def test_sglang_llama_first_id_does_not_matter():
    # Only deepseek_v2.py has the first-id rule (PR #25454 changed that one file).
    assert map_layer_ids("sglang", [2, 16, 29], 32, arch="llama").hf_indices == (3, 17, 30)


def test_sglang_defaults_have_no_offset():
    # llama.py: layer_ids is None -> layers_to_capture = [2, N//2, N-3], no +1.
    m = map_layer_ids("sglang", None, 32)
    assert m.layer_ids == (2, 16, 29)
    assert m.hf_indices == (2, 16, 29)
    assert map_layer_ids("sglang", [2, 16, 29], 32, explicit=False).hf_indices == (2, 16, 29)


def test_sglang_deepseek_first_id_rule():
    # deepseek_v2.py after PR #25454: +1 only when the first id is 1 ("output-of-layer" convention).
    assert map_layer_ids("sglang", [1, 29, 57], N_DSV3, arch="deepseek_v3").hf_indices == (2, 30, 58)
    assert map_layer_ids("sglang", [2, 30, 58], N_DSV3, arch="deepseek_v3").hf_indices == (2, 30, 58)
    assert map_layer_ids("sglang", [2, 30, 58], N_DSV3, arch="kimi_k2").hf_indices == (2, 30, 58)


def test_sglang_deepseek_before_the_first_id_rule_adds_one_always():
    # deepseek_v2.py at commit 3e4a39ee (late 2025): [val + 1 for val in layer_ids].
    m = map_layer_ids("sglang", [2, 30, 58], N_DSV3, arch="deepseek_v3", sglang_first_id_rule=False)
    assert m.hf_indices == (3, 31, 59)


def test_sglang_refuses_ids_it_can_never_capture():
    # The capture loop runs before layers 0..N-1, and before layer 0 there is no residual:
    # an explicit id N-1 would need HF[N], which is never appended.
    with pytest.raises(BadInput, match="never captures"):
        map_layer_ids("sglang", [2, 16, 31], 32)
    with pytest.raises(BadInput, match="outside 0..32"):
        map_layer_ids("sglang", [2, 16, 33], 32)


def test_specforge_default_ids_are_the_eagle3_reference_layers():
    # model_providers.py default [1, N//2 - 1, N - 4], captured through SGLang with +1.
    n = 32
    assert default_layer_ids("specforge", n) == (1, 15, 28)
    m = map_layer_ids("specforge", None, n)
    assert m.hf_indices == (2, 16, 29) == eagle3_hf_indices(n)
    # DeepSeek-V3: [1, 29, 56] -> HF[2, 30, 57] = EAGLE-3 reference (2, 61//2, 61-3).
    assert map_layer_ids("specforge", None, N_DSV3).hf_indices == (2, 30, 58) == eagle3_hf_indices(N_DSV3)


def test_vllm_id_is_the_hf_index_and_n_is_prenorm():
    # interfaces.py: id 0 before layer 0, id idx+1 after layer idx, hidden_states + residual.
    m = map_layer_ids("vllm", [0, 2, 16, 32], 32)
    assert m.hf_indices == (0, 2, 16, 32)
    assert m.final_norm == FINAL_NORM_PRE


def test_speculators_default_ids_include_the_last_layer():
    # speculators scripts/launch_vllm.py: [2, N//2, N-3, N] (--include-last-layer on by default).
    assert default_layer_ids("speculators", N_DSV3) == (2, 30, 58, 61)
    m = map_layer_ids("speculators", None, N_DSV3)
    assert m.hf_indices == (2, 30, 58, 61)
    assert m.final_norm == FINAL_NORM_PRE


def test_eagle3_reference_layers():
    # EAGLE modeling_llama_kv.py: idx == 2, len(layers)//2, len(layers)-3, appended before the layer.
    assert eagle3_hf_indices(32) == (2, 16, 29)
    assert map_layer_ids("eagle3", None, 32).hf_indices == (2, 16, 29)


def test_shift_explanations_name_both_directions():
    assert any("+1" in s for s in shift_explanations(1))
    assert any("vLLM" in s for s in shift_explanations(-1))
    assert shift_explanations(0) == []
    assert shift_explanations(3) == []


def test_unknown_system_and_empty_ids_are_bad_input():
    with pytest.raises(BadInput, match="unknown system"):
        map_layer_ids("tgi", [1], 8)
    with pytest.raises(BadInput, match="no layer ids"):
        map_layer_ids("vllm", [], 8)


@pytest.mark.parametrize("system", NO_DEFAULT_IDS)
def test_a_system_without_default_ids_asks_for_them(system):
    # a notebook's map_layer_ids(system, None, n) once ended in a KeyError (an internal error)
    with pytest.raises(BadInput, match="no default layer ids"):
        default_layer_ids(system, 32)
    with pytest.raises(BadInput, match="no default layer ids"):
        map_layer_ids(system, None, 32)


def test_every_rule_names_its_source():
    for system in ("sglang", "sglang_deepseek", "sglang_aux_switch", "specforge", "vllm", "vllm_extract",
                   "speculators", "eagle3"):
        assert "/" in SOURCES[system] and ".py" in SOURCES[system]


def test_lmdeploy_ignores_the_ids_and_taps_the_inputs_of_2_half_and_n_minus_3():
    # lmdeploy/pytorch/configurations/llama.py: aux_hidden_state_layers = (2, N//2, N-3) for eagle3;
    # models/llama.py appends hidden_states + residual before layer idx: the input of that layer.
    for ids in ([1, 29, 57], [2, 30, 58], None):
        m = map_layer_ids("lmdeploy", ids, N_DSV3)
        assert m.hf_indices == (2, 30, 58) and m.final_norm == FINAL_NORM_POST
    assert "ignored" in map_layer_ids("lmdeploy", [5, 6, 7], 32).rule


def test_llamacpp_id_k_is_the_input_of_layer_k_and_n_layer_the_pre_norm_final():
    # common/speculative.cpp: id < n_layer -> llama_set_embeddings_layer_inp(id); id == n_layer -> nextn.
    m = map_layer_ids("llamacpp", [2, 30, 61], N_DSV3)
    assert m.hf_indices == (2, 30, 61) and m.final_norm == FINAL_NORM_PRE
    with pytest.raises(BadInput):
        map_layer_ids("llamacpp", [2, 30, 62], N_DSV3)  # llama.cpp aborts past n_layer
