"""How each system is told to feed an EAGLE-3 drafter, in that system's own words: one row a system.

A fix that asks to change an engine's algorithm or layer ids names the flag of the system the side
came from (its dump's provenance says which, :func:`system_of`), so a vLLM user is never handed
SGLang's flag. What an id captures is decided in :mod:`alignprobe.conventions` alone; a row here
only says it in words. Each row names where it was read; docs/layer-ids.md renders the table and
its sources (tests/docs/test_docs.py keeps the two equal).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from alignprobe.conventions import map_layer_ids
from alignprobe.errors import BadInput

SERVE, TRAIN = "serve", "train"


@dataclasses.dataclass(frozen=True)
class Flags:
    name: str  # the system as its users write it
    role: str  # SERVE: an engine that runs the drafter; TRAIN: an extractor whose states train it
    eagle3: str  # what picks EAGLE-3 (the aux concat) for a serving engine; "" for an extractor
    eagle: str  # what picks plain EAGLE (the final state only); "" where the system has none
    aux_ids: str  # where the aux layer ids are set
    final_layer: str  # how the final layer joins the aux concat, or that it cannot
    numbering: str  # what an id k captures, in HF terms
    source: str  # repository, path and commit the row was read at


SYSTEM_FLAGS: dict[str, Flags] = {
    "sglang": Flags(
        "SGLang", SERVE,
        eagle3="--speculative-algorithm EAGLE3 with --speculative-draft-model-path DRAFTER",
        eagle="--speculative-algorithm EAGLE",
        aux_ids="the drafter config's eagle_config.eagle_aux_hidden_state_layer_ids",
        final_layer="not possible: SGLang captures the input of a decoder layer, HF[1]..HF[N-1] only",
        numbering="an explicit id k captures HF[k+1] on llama-style models (deepseek_v2: only when the first "
                  "id is 1); with no ids the model's defaults capture HF[2], HF[N//2], HF[N-3]",
        source="sgl-project/sglang python/sglang/srt/model_executor/model_runner.py (aux capture only when "
               "spec_algorithm.is_eagle3(), the ids from the draft config's eagle_config) and "
               "python/sglang/srt/models/llama.py set_eagle3_layers_to_capture (commit bf7a0e23)",
    ),
    "vllm": Flags(
        "vLLM", SERVE,
        eagle3='--speculative-config \'{"method": "eagle3", "model": DRAFTER, "num_speculative_tokens": K}\'',
        eagle='"method": "eagle" in --speculative-config',
        aux_ids="the drafter config.json's eagle_aux_hidden_state_layer_ids (top level, else eagle_config's)",
        final_layer="id N in the list: the last layer's output before the final norm (deepseek_v2 since PR #46973)",
        numbering="id k captures the input of layer k = HF[k], no offset; id N is the last layer's output "
                  "before the final norm",
        source="vllm-project/vllm vllm/model_executor/models/interfaces.py EagleModelMixin._maybe_add_hidden_state "
               "(after PR #46973, 2026-06-28); method eagle3 since PR #16937; the ids from "
               "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py get_eagle3_aux_layers_from_config",
    ),
    "trtllm": Flags(
        "TensorRT-LLM", SERVE,
        eagle3='speculative_config decoding_type "Eagle3" (Eagle3DecodingConfig) with speculative_model DRAFTER',
        eagle='decoding_type "Eagle"',
        aux_ids="eagle3_layers_to_capture in the speculative config",
        final_layer="id -1: the post-norm final, always moved last (id N-1 is the last layer's output before the norm)",
        numbering="id k captures the output of layer k = HF[k+1] (N-1: before the final norm); -1 is the post-norm final",
        source="NVIDIA/TensorRT-LLM tensorrt_llm/llmapi/llm_args.py (Eagle3DecodingConfig decoding_type \"Eagle3\", "
               "eagle3_layers_to_capture, default {1, N//2-1, N-4}; read in the search index, commit not pinned) "
               "and tensorrt_llm/_torch/speculative/eagle3.py "
               "Eagle3SpecMetadata (commit f933a608)",
    ),
    "llamacpp": Flags(
        "llama.cpp", SERVE,
        eagle3="llama-server -md DRAFTER.gguf --spec-type draft-eagle3",
        eagle="",
        aux_ids="the drafter GGUF's eagle3.target_layers (eagle3.extract_layers in older llama.cpp; "
                "convert_hf_to_gguf.py copies them from the drafter config's top-level "
                "eagle_aux_hidden_state_layer_ids, not eagle_config's: set them there and convert the drafter again)",
        final_layer="id n_layer: the last layer's output before the final norm (PR #25794), built only by models "
                    "that set t_h_nextn (openai-moe, deepseek2, qwen3next): a Llama target feeds zeros there",
        numbering="id k < n_layer captures the input of layer k = HF[k]; id n_layer the pre-norm final",
        source="ggml-org/llama.cpp common/speculative.cpp common_speculative_impl_draft_eagle3 (commit 001d906a: "
               "llama_set_embeddings_layer_inp for id < n_layer, llama_set_embeddings_nextn for id == n_layer, "
               "exactly 3 ids), src/models/eagle3.cpp (commit 8002c4ce: LLM_KV_EAGLE3_EXTRACT_LAYERS, "
               "LLM_KV_EAGLE3_TARGET_HIDDEN_SIZE), PR #25794 (merged 2026-07: the final layer, and the converter "
               "taking the ids from the drafter config); at 0c1e5709 (vendored by llama-cpp-python 0.3.36) the key is "
               "eagle3.target_layers (LLM_KV_TARGET_LAYERS, src/llama-arch.cpp)",
    ),
    "lmdeploy": Flags(
        "LMDeploy", SERVE,
        eagle3="--speculative-algorithm eagle3 --speculative-draft-model DRAFTER (PyTorch engine, "
               "SpeculativeConfig(method='eagle3') in Python)",
        eagle="--speculative-algorithm eagle",
        aux_ids="none: the taps are fixed at (2, N//2, N-3) for LlamaForCausalLM targets, the drafter config's "
                "ids are never read",
        final_layer="not possible: the taps are fixed",
        numbering="the fixed taps 2, N//2, N-3 are inputs of layers (hidden_states + residual) = HF[2], HF[N//2], "
                  "HF[N-3]",
        source="InternLM/lmdeploy lmdeploy/pytorch/configurations/llama.py (aux_hidden_state_layers = "
               "(2, N//2, N-3) when spec_method == 'eagle3'), lmdeploy/pytorch/models/llama.py (appended before "
               "layer idx), lmdeploy/cli/utils.py (--speculative-algorithm, --speculative-draft-model) "
               "(commit 1263d5cd, 2026-08-21)",
    ),
    "specforge": Flags(
        "SpecForge", TRAIN, eagle3="", eagle="",
        aux_ids="the run's model.aux_hidden_state_layer_ids, else the draft config's "
                "eagle_config.eagle_aux_hidden_state_layer_ids",
        final_layer="not possible: exactly three ids",
        numbering="id k is the output of layer k = HF[k+1]",
        source="sgl-project/SpecForge specforge/algorithms/model_providers.py resolve_eagle_capture_layers "
               "(commit a6b6b023)",
    ),
    "speculators": Flags(
        "speculators", TRAIN, eagle3="", eagle="",
        aux_ids="scripts/launch_vllm.py --target-layer-ids (and the same ids to the training run)",
        final_layer="--include-last-layer (on by default) appends N, the pre-norm final",
        numbering="vLLM's: id k = HF[k]; N is the pre-norm final",
        source="vllm-project/speculators scripts/launch_vllm.py (commit 01a981e8)",
    ),
    "modelopt-hf": Flags(
        "Model-Optimizer (HF dump)", TRAIN, eagle3="", eagle="",
        aux_ids="--aux-layers of compute_hidden_states_hf.py",
        final_layer="saved apart as hidden_states (post-norm), never in the aux concat",
        numbering="id k is the output of layer k = HF[k+1]",
        source="NVIDIA/Model-Optimizer examples/speculative_decoding/collect_hidden_states/"
               "compute_hidden_states_hf.py (commit bee497de)",
    ),
    "modelopt-vllm": Flags(
        "Model-Optimizer (vLLM dump)", TRAIN, eagle3="", eagle="",
        aux_ids="--aux-layers of compute_hidden_states_vllm.py",
        final_layer="N is appended and saved apart as hidden_states (pre-norm)",
        numbering="vLLM's: id k = HF[k]",
        source="NVIDIA/Model-Optimizer examples/speculative_decoding/collect_hidden_states/"
               "compute_hidden_states_vllm.py (commit bee497de)",
    ),
    "hf": Flags(
        "alignprobe capture hf", TRAIN, eagle3="", eagle="",
        aux_ids="--aux-layers (HF indices)",
        final_layer="N in --aux-layers, with --aux-final-norm pre or post",
        numbering="HF indices as given",
        source="alignprobe/cli/capture.py",
    ),
}

# Words of a provenance's engine field, first match wins; an import names its system outright
# (capture["system"]), which tells Model-Optimizer's two backends apart.
ENGINE_WORDS = (("sglang", ("sglang",)), ("specforge", ("specforge",)), ("speculators", ("speculators",)),
                ("trtllm", ("tensorrt", "trtllm", "trt-llm")), ("llamacpp", ("llama.cpp", "llamacpp", "llama-cpp")),
                ("lmdeploy", ("lmdeploy",)), ("vllm", ("vllm",)), ("hf", ("transformers",)))


def system_of(provenance: Mapping[str, Any]) -> str:
    """The row of SYSTEM_FLAGS a dump's provenance names, or "" for a system not in the table."""
    told = str((provenance.get("capture") or {}).get("system") or "").lower()
    if told in SYSTEM_FLAGS:
        return told
    engine = str(provenance.get("engine") or "").lower()
    return next((system for system, words in ENGINE_WORDS if any(w in engine for w in words)), "")


def ids_in(system: str, hf_indices: list[int], num_layers: int) -> list[int | None]:
    """The id that makes ``system`` capture each HF index (None where none does), inverting
    conventions.map_layer_ids one id at a time: the rule lives there, not here."""
    out: list[int | None] = []
    for h in hf_indices:
        found = None
        for k in (h, h - 1, h + 1):
            try:
                if map_layer_ids(system, [k], num_layers).hf_indices == (h,):
                    found = k
                    break
            except BadInput:
                continue
        out.append(found)
    return out
