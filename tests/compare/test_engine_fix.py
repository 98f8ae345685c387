"""compare/diagnoses/engine_fix.py: a layer offset's fix speaks the serve engine's own words."""

from alignprobe.compare.diagnoses.engine_fix import engine_of, offset_fix


def test_a_llamacpp_offset_is_fixed_in_the_drafter_gguf():
    fix, cause = offset_fix(-1, [2, 4, 5], {"engine": "llama.cpp"}, {"engine": "transformers"})
    assert fix.startswith("Set the drafter GGUF's target layers to [2, 4, 5]") and "eagle3.target_layers" in fix
    assert "eagle_aux_hidden_state_layer_ids" in fix and "convert_hf_to_gguf.py" in fix
    assert "vLLM" not in fix and "SGLang" not in fix
    assert "input of layer k" in cause


def test_a_llamacpp_offset_names_a_drafter_trained_on_sglang_states():
    _, cause = offset_fix(-1, [2, 4, 5], {"engine": "llama.cpp"}, {"engine": "specforge"})
    assert "specforge states, whose id k is the output of layer k = HF[k+1]" in cause


def test_engine_names_are_told_apart():
    assert [engine_of({"engine": e}) for e in ("llama.cpp", "vllm", "sglang", "transformers", "tensorrt")] == [
        "llama.cpp", "vllm", "sglang", "transformers", ""]
