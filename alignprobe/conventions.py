"""How each system numbers the layers it captures, said in HF-index terms.

HF[0] is the embedding output, HF[k] the input of decoder layer k (= output of layer k-1, which
engines that keep the residual apart compute as ``hidden_states + residual``), HF[N] the output of
the final norm. Each rule below was read from the system's public source; :data:`SOURCES` names the
file and the commit or date read, and must be re-checked when a system changes.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from alignprobe.dump.schema import FINAL_NORM_POST, FINAL_NORM_PRE, MAX_NUM_LAYERS
from alignprobe.errors import BadInput

# Where each rule was read (file, commit or date). Tests in tests/test_conventions.py restate the
# worked examples from these files.
SOURCES = {
    "sglang": (
        "sgl-project/sglang python/sglang/srt/models/llama.py (commit bf7a0e23 and 2026 main): "
        "set_eagle3_layers_to_capture sets layers_to_capture = [k + 1 for explicit ids], "
        "[2, N//2, N-3] when no ids are given; LlamaModel.forward appends hidden_states + residual "
        "BEFORE layer i for i in layers_to_capture, and returns norm(hidden_states) as the last state"
    ),
    "sglang_deepseek": (
        "sgl-project/sglang python/sglang/srt/models/deepseek_v2.py: commit 3e4a39ee (late 2025) adds +1 "
        "to every explicit id; PR #25454 (merged 2026-05-18, sha f5049709b323, only deepseek_v2.py "
        "changed) applies the +1 only when the first id is 1"
    ),
    "sglang_aux_switch": (
        "sgl-project/sglang python/sglang/srt/model_executor/model_runner.py: aux capture is set up only "
        "when spec_algorithm.is_eagle3() (and for DFLASH/DSPARK), with the ids from the draft config's "
        "eagle_config.eagle_aux_hidden_state_layer_ids (None -> the model's default); "
        "layers/logits_processor.py concatenates the aux states along the last dim under "
        "CaptureHiddenMode.FULL, else stores the final (post-norm) hidden state"
    ),
    "specforge": (
        "sgl-project/SpecForge specforge/algorithms/model_providers.py resolve_eagle_capture_layers "
        "(commit a6b6b023, 2026-08-08): default [1, N//2-1, N-4]; captured through SGLang's "
        "set_eagle3_layers_to_capture (offline_capture/sglang_backend/capture.py), so id k = HF[k+1]"
    ),
    "vllm": (
        "vllm-project/vllm vllm/model_executor/models/interfaces.py EagleModelMixin._maybe_add_hidden_state "
        "(hidden_states + residual) called with id 0 before the layers and id idx+1 after layer idx "
        "(llama/qwen2/deepseek_v2 after PR #46973, 2026-06-28): id k = HF[k], id N = last layer output "
        "before the final norm; default ids (2, N//2, N-3)"
    ),
    "vllm_extract": (
        "vllm-project/vllm vllm/model_executor/models/extract_hidden_states.py (commit 055e47c2) and "
        "vllm/distributed/kv_transfer/kv_connector/v1/example_hidden_states_connector.py (commit 015a95c8): "
        "{shared_storage_path}/{req_id}.safetensors with hidden_states [S, len(ids), H] in the KV-cache "
        "dtype (model dtype) and token_ids [S] (prompt only unless include_output_tokens); "
        "kv_transfer_params['hidden_states_path'] in the response"
    ),
    "speculators": (
        "vllm-project/speculators scripts/launch_vllm.py (commit c05b95b3, 2026-08-20): ids "
        "[2, N//2, N-3] plus N (--include-last-layer, default on), passed to vLLM extract_hidden_states"
    ),
    "trtllm": (
        "NVIDIA/TensorRT-LLM tensorrt_llm/_torch/speculative/eagle3.py (commit f933a608) Eagle3SpecMetadata: "
        "default layers_to_capture (1, N//2-1, N-4), explicit ids sorted with -1 moved last; "
        "maybe_capture_hidden_states stores hidden_states + residual after decoder layer k "
        "(models/modeling_llama.py), so id k = HF[k+1]; llmapi/llm_args.py SaveHiddenStatesDecodingConfig: "
        "-1 is the final post-norm state, always saved last as hidden_state (save_hidden_state.py, commit 3e906a0e)"
    ),
    "modelopt-hf": (
        "NVIDIA/Model-Optimizer examples/speculative_decoding/collect_hidden_states/compute_hidden_states_hf.py "
        "(commit bee497de): aux_hidden_states = cat(outputs.hidden_states[k + 1] for k in --aux-layers), "
        "hidden_states = outputs.hidden_states[-1] (post-norm): id k is the output of layer k = HF[k+1]"
    ),
    "modelopt-vllm": (
        "NVIDIA/Model-Optimizer examples/speculative_decoding/collect_hidden_states/compute_hidden_states_vllm.py "
        "(commit bee497de): the --aux-layers ids plus num_hidden_layers go to vLLM's "
        "eagle_aux_hidden_state_layer_ids (id k = HF[k]); hidden_states is the last slice, vLLM's id N: "
        "the pre-norm final"
    ),
    "deepspec": (
        "deepseek-ai/DeepSpec deepspec/modeling/target_extract.py (commit 1bcc590c) run_target_forward_with_hooks: "
        "a forward hook on backbone.layers[k] keeps that layer's output (id k = HF[k+1]; k = N-1 is the pre-norm "
        "output of the last layer), id -1 hooks embed_tokens (HF[0]); target_last_hidden_states is the "
        "backbone's last_hidden_state (post-norm); ids are stored ascending in the cache's manifest.json"
    ),
    "lmdeploy": (
        "InternLM/lmdeploy lmdeploy/pytorch/configurations/llama.py (commit 1263d5cd, 2026-08-21): for a "
        "LlamaForCausalLM target served with spec_method 'eagle3', hf_config.aux_hidden_state_layers = "
        "(2, N//2, N-3), whatever the drafter config says (no file of the repository reads "
        "eagle_aux_hidden_state_layer_ids); lmdeploy/pytorch/models/llama.py LlamaModel.forward appends "
        "hidden_states + residual BEFORE layer idx, then returns norm(hidden_states): HF[2], HF[N//2], HF[N-3]"
    ),
    "llamacpp": (
        "ggml-org/llama.cpp (commit 0c1e5709, vendored by llama-cpp-python 0.3.36) common/speculative.cpp: "
        "EAGLE-3 reads the drafter GGUF's eagle3.target_layers (LLM_KV_TARGET_LAYERS, src/llama-arch.cpp; "
        "eagle3.extract_layers before the rename, src/models/eagle3.cpp at 0274f0fc) and, for each id k < n_layer, "
        "llama_get_embeddings_layer_inp(ctx_tgt, k), which src/models/llama.cpp records as t_layer_inp[il] = "
        "inpL at the top of layer il (the input of layer k = HF[k]); id k = n_layer reads "
        "llama_get_embeddings_nextn, the state before the final norm (only models that set t_h_nextn build it: "
        "openai-moe, deepseek2, qwen3next...; on a Llama target the buffer is never written, measured zeros); "
        "convert_hf_to_gguf.py conversion/llama.py writes the drafter config's top-level "
        "eagle_aux_hidden_state_layer_ids (not eagle_config's), default [2, N//2, N-3]"
    ),
    "eagle3": (
        "SafeAILab/EAGLE eagle/model/modeling_llama_kv.py: appends hidden_states BEFORE layer idx for "
        "idx in (2, N//2, N-3), i.e. HF[2], HF[N//2], HF[N-3]"
    ),
}


@dataclasses.dataclass(frozen=True)
class LayerMapping:
    """Layer ids as one system was configured with them, and the HF indices they really capture."""

    system: str
    layer_ids: tuple[int, ...]
    hf_indices: tuple[int, ...]
    final_norm: str  # what HF[N] means in a stream this system captured
    rule: str  # the convention applied, in one line, with the source version it was read from


def eagle3_hf_indices(num_layers: int) -> tuple[int, ...]:
    """The HF indices the EAGLE-3 reference trains on: inputs of layers 2, N//2 and N-3."""
    return (2, num_layers // 2, num_layers - 3)


def default_layer_ids(system: str, num_layers: int) -> tuple[int, ...]:
    """The layer ids a system uses when none are configured, in that system's own numbering."""
    n = num_layers
    defaults = {
        "sglang": (2, n // 2, n - 3),
        "specforge": (1, n // 2 - 1, n - 4),
        "vllm": (2, n // 2, n - 3),
        "speculators": (2, n // 2, n - 3, n),
        "eagle3": (2, n // 2, n - 3),
        "hf": (2, n // 2, n - 3),
        "trtllm": (1, n // 2 - 1, n - 4),
        "llamacpp": (2, n // 2, n - 3),  # convert_hf_to_gguf.py's, for a drafter config without ids
        "lmdeploy": (2, n // 2, n - 3),  # not a default: the only taps it has
    }
    system = _known(system)
    if system not in defaults:  # NO_DEFAULT_IDS
        raise BadInput(f"{system} has no default layer ids (its runs record or compute their own): give the ids it used")
    return defaults[system]


DEEPSEEK_ARCHS = ("deepseek_v2", "deepseek_v3", "deepseek_v32", "kimi_k2", "kimi_k25")


def map_layer_ids(
    system: str,
    layer_ids: Sequence[int] | None,
    num_layers: int,
    *,
    arch: str = "llama",
    explicit: bool = True,
    sglang_first_id_rule: bool = True,
) -> LayerMapping:
    """The HF indices that ``layer_ids``, as configured in ``system``, capture.

    ``explicit`` says the ids were set by hand (SGLang adds +1 to those, not to its defaults);
    ``arch`` is the model family for rules that differ by model file (SGLang's deepseek_v2, which
    Kimi-K2.x and DeepSeek-V3 run on). ``sglang_first_id_rule=False`` describes SGLang servers from
    before PR #25454 (2026-05-18), whose deepseek_v2 added +1 to every explicit id.
    """
    system = _known(system)
    n = num_layers
    if not 1 <= n <= MAX_NUM_LAYERS:
        raise BadInput(f"{n} layers is not a model's layer count (1..{MAX_NUM_LAYERS}); give the target's num_hidden_layers")
    if layer_ids is None:
        layer_ids, explicit = default_layer_ids(system, n), False
    ids = tuple(int(i) for i in layer_ids)
    if not ids:
        raise BadInput("no layer ids given: name at least one")
    lowest = -1 if system == "deepspec" else 0  # DeepSpec's -1 names the embedding output
    bad = [i for i in ids if not lowest <= i <= n]
    if bad:
        raise BadInput(f"layer ids {bad} are outside 0..{n} for a model of {n} layers")

    if system == "sglang":
        return _sglang(ids, n, arch, explicit, sglang_first_id_rule)
    if system == "specforge":
        hf = _capturable_by_sglang(ids, tuple(i + 1 for i in ids), n, "SpecForge")
        rule = "SpecForge 2026-08: id k is the output of layer k = HF[k+1] (captured through SGLang with +1)"
        return LayerMapping(system, ids, hf, FINAL_NORM_POST, rule)
    if system in ("vllm", "speculators"):
        who = "speculators (vLLM extract_hidden_states)" if system == "speculators" else "vLLM 2026-06+"
        rule = f"{who}: id k is the input of layer k = HF[k], no offset; id N is the last layer's output before the norm"
        return LayerMapping(system, ids, ids, FINAL_NORM_PRE, rule)
    if system == "llamacpp":
        return LayerMapping(system, ids, ids, FINAL_NORM_PRE,
                            "llama.cpp EAGLE-3 (eagle3.target_layers): id k is the input of layer k = HF[k], "
                            "no offset; id n_layer is the last layer's output before the final norm")
    if system == "eagle3":
        return LayerMapping(system, ids, ids, FINAL_NORM_POST, "EAGLE-3 reference: id k is the input of layer k = HF[k]")
    if system == "trtllm":
        # hidden_states + residual after layer k: for k = N-1 the last layer's output before the norm
        return LayerMapping(system, ids, tuple(i + 1 for i in ids), FINAL_NORM_PRE,
                            "TensorRT-LLM: id k is the output of layer k = HF[k+1] (id N-1: before the final norm)")
    if system == "modelopt-hf":
        # outputs.hidden_states[k + 1]: HF's tuple, whose last entry is the post-norm state
        return LayerMapping(system, ids, tuple(i + 1 for i in ids), FINAL_NORM_POST,
                            "Model-Optimizer HF dump: id k is the output of layer k = HF[k+1]")
    if system == "deepspec":
        return LayerMapping(system, ids, tuple(i + 1 for i in ids), FINAL_NORM_PRE,
                            "DeepSpec: id k is the output of layer k = HF[k+1] (a forward hook), id -1 the "
                            "embedding output = HF[0]")
    if system == "lmdeploy":
        # the configured ids are never read: the taps are LMDeploy's own, whatever was asked
        taps = default_layer_ids("lmdeploy", n)
        return LayerMapping(system, ids, taps, FINAL_NORM_POST,
                            f"LMDeploy (Llama targets): taps fixed at (2, N//2, N-3), inputs of layers = HF{list(taps)}; "
                            "the drafter config's ids are ignored")
    if system == "modelopt-vllm":
        return LayerMapping(system, ids, ids, FINAL_NORM_PRE,
                            "Model-Optimizer vLLM dump (vLLM's numbering): id k is the input of layer k = HF[k]; "
                            "its final state is the pre-norm output of the last layer")
    return LayerMapping(system, ids, ids, FINAL_NORM_POST, "HF index as given")


def _sglang(ids: tuple[int, ...], n: int, arch: str, explicit: bool, first_id_rule: bool) -> LayerMapping:
    deepseek = arch.lower() in DEEPSEEK_ARCHS
    if not explicit:
        hf, rule = ids, "SGLang: default ids [2, N//2, N-3] go straight into layers_to_capture: HF[k], no offset"
    elif deepseek and first_id_rule and ids[0] != 1:
        hf, rule = ids, "SGLang deepseek_v2 (PR #25454, 2026-05): first id is not 1, so ids capture HF[k], no offset"
    elif deepseek and first_id_rule:
        hf = tuple(i + 1 for i in ids)
        rule = "SGLang deepseek_v2 (PR #25454, 2026-05): first id is 1, so every id k captures HF[k+1]"
    else:
        hf = tuple(i + 1 for i in ids)
        rule = "SGLang: explicit ids k capture the input of layer k+1 = HF[k+1] (set_eagle3_layers_to_capture)"
    return LayerMapping("sglang", ids, _capturable_by_sglang(ids, hf, n, "SGLang"), FINAL_NORM_POST, rule)


def _capturable_by_sglang(ids, hf: tuple[int, ...], n: int, who: str) -> tuple[int, ...]:
    # SGLang appends hidden_states + residual before layer i for i in 0..N-1; before layer 0 the
    # residual does not exist yet, so HF[1]..HF[N-1] are the only states it can capture.
    bad = [k for k, h in zip(ids, hf) if not 1 <= h <= n - 1]
    if bad:
        raise BadInput(
            f"{who} layer ids {bad} map to HF indices outside 1..{n - 1}, which SGLang never captures "
            "(it takes the input of a decoder layer): the drafter would get fewer aux states than it expects"
        )
    return hf


def shift_explanations(shift: int) -> list[str]:
    """Known pairs of conventions that put serving ``shift`` layers from training (serve - train)."""
    if shift == 1:
        return [
            "SGLang adds +1 to explicitly configured layer ids (set_eagle3_layers_to_capture): ids that meant "
            "HF indices (vLLM / EAGLE-3 reference numbering) land one layer deeper",
            "SpecForge ids (output of layer k) were read as HF[k+1] by the engine but training used HF[k]",
        ]
    if shift == -1:
        return [
            "vLLM reads layer ids as HF[k] with no offset: ids written for SGLang/SpecForge (output of "
            "layer k = HF[k+1]) land one layer shallower",
            "SGLang's deepseek_v2 (since PR #25454, 2026-05) applies +1 only when the first id is 1: a drafter "
            "config whose first id is not 1 is read without the offset",
        ]
    return []


# Systems with no default an import could assume: Model-Optimizer's files never hold their ids and its
# 'eagle' preset is computed by modelopt itself (default_eagle_aux_layer_ids), not read here; a DeepSpec
# cache records its own.
NO_DEFAULT_IDS = ("modelopt-hf", "modelopt-vllm", "deepspec")
SYSTEMS = ("hf", "eagle3", "sglang", "specforge", "vllm", "speculators", "trtllm", "modelopt-hf", "modelopt-vllm",
           "deepspec", "lmdeploy", "llamacpp")
# Systems that read no layer ids: a drafter must be trained on the taps they have.
FIXED_TAPS = ("lmdeploy",)


def _known(system: str) -> str:
    s = system.lower()
    if s not in SYSTEMS:
        raise BadInput(f"unknown system {system!r}: choose one of {', '.join(SYSTEMS)}")
    return s


# The SGLang server flags under which a prefill returns a state for every prompt token (the radix
# cache and chunked prefill otherwise return only the rows they computed): named by the capture and
# by compare's short_rows finding, so it lives here rather than in the probes.
SGLANG_FLAGS_FULL_ROWS = "--disable-radix-cache --chunked-prefill-size -1"
