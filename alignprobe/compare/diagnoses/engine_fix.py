"""Fix texts that name the serve engine's own layer-id convention (docs/layer-ids.md), from the
serve dump's provenance: vLLM reads ``eagle_aux_hidden_state_layer_ids`` as HF[k]; SGLang adds 1 to
explicit ids for llama-style models and, for deepseek_v2 / Kimi, only when the first id is 1; llama.cpp
reads the drafter GGUF's ``eagle3.target_layers`` as HF[k]. A vLLM capture is never blamed on SGLang,
nor the reverse."""

from __future__ import annotations

from alignprobe.conventions import DEEPSEEK_ARCHS, shift_explanations

VLLM = ("vllm", "speculators")
SGLANG = ("sglang", "specforge")
LLAMACPP = ("llama.cpp",)


def engine_of(provenance: dict) -> str:
    engine = str(provenance.get("engine") or "").lower()
    return next((e for e in VLLM + SGLANG + LLAMACPP + ("transformers",) if e in engine), "")


def offset_fix(shift: int, expected_hf: list[int], serve_provenance: dict, train_provenance: dict) -> tuple[str, str]:
    """(fix, the convention named) for serve = train + ``shift`` layers, expected HF indices given."""
    engine, trained = engine_of(serve_provenance), engine_of(train_provenance)
    want = ", ".join(str(i) for i in expected_hf)
    if engine in VLLM:
        cause = "vLLM reads eagle_aux_hidden_state_layer_ids as HF[k], no offset"
        if trained in SGLANG:
            cause += f"; the drafter was trained on {trained} states, whose id k is the output of layer k = HF[k+1]"
        return (f"Set the drafter config's eagle_aux_hidden_state_layer_ids to [{want}] for vLLM ({cause}); "
                "or retrain on the served indices.", cause)
    if engine in LLAMACPP:
        cause = ("llama.cpp reads the drafter GGUF's eagle3.target_layers (eagle3.extract_layers in older files) as "
                 "HF[k], the input of layer k, no offset")
        if trained in SGLANG:
            cause += f"; the drafter was trained on {trained} states, whose id k is the output of layer k = HF[k+1]"
        return (f"Set the drafter GGUF's target layers to [{want}] ({cause}): convert_hf_to_gguf.py copies the drafter "
                "config's eagle_aux_hidden_state_layer_ids, so set them there and convert the drafter again; "
                "or retrain on the served indices.", cause)
    if engine in SGLANG:
        model = " ".join(str(serve_provenance.get(k) or "") for k in ("model", "extra")).lower()
        deepseek = any(a.replace("_", "") in model.replace("_", "").replace("-", "") for a in DEEPSEEK_ARCHS + ("kimi",))
        minus = ", ".join(str(i - 1) for i in expected_hf)
        if deepseek:
            cause = "SGLang's deepseek_v2 (DeepSeek / Kimi) adds +1 to explicit ids only when the first id is 1 (PR #25454)"
            return (f"Configure SGLang's aux layer ids so it captures HF[{want}] ({cause}): "
                    f"{_deepseek_ids(expected_hf)}; or retrain on the served indices.", cause)
        cause = "SGLang adds +1 to explicitly configured ids for llama-style models (set_eagle3_layers_to_capture)"
        return (f"Configure SGLang's aux layer ids so it captures HF[{want}] ({cause}): for a llama-style "
                f"model explicit ids [{minus}]; or retrain on the served indices.", cause)
    known = shift_explanations(shift)
    cause = known[0] if known else "no known convention pair gives this shift"
    return (f"Shift the engine's aux layer ids by {-shift:+d} so it captures HF[{want}] (or retrain on the served "
            f"indices). Likely cause: {cause}.", cause)


def _deepseek_ids(expected_hf: list[int]) -> str:
    """The ids that make SGLang's deepseek_v2 capture ``expected_hf``: since PR #25454 ids whose first
    is 1 are read as HF[k+1], others as HF[k]; older servers add 1 to every id."""
    minus = ", ".join(str(i - 1) for i in expected_hf)
    same = ", ".join(str(i) for i in expected_hf)
    if expected_hf and expected_hf[0] == 2:
        return f"explicit ids [{minus}] (the first id is 1, so +1 applies on every SGLang version)"
    if expected_hf and expected_hf[0] == 1:
        return (f"explicit ids [{minus}] on servers older than PR #25454 (+1 to every id); since that PR no "
                "id list reaches HF[1] first (a first id of 1 is read as HF[2])")
    return (f"explicit ids [{same}] since PR #25454 (a first id other than 1 is read as HF[k]), "
            f"[{minus}] on older servers (+1 to every id)")


def eagle3_fix(serve_provenance: dict) -> str:
    engine = engine_of(serve_provenance)
    if engine in VLLM:
        return ("Serve with speculative method eagle3 and the drafter's eagle_aux_hidden_state_layer_ids: with "
                "plain eagle vLLM feeds the final state only, the EAGLE-3 drafter's fc is skipped and the accept "
                "length drops to 1.0.")
    return ("Run the engine with --speculative-algorithm EAGLE3: with EAGLE it captures no aux states, the "
            "EAGLE-3 drafter's fc is skipped and the accept length drops to 1.0. (vLLM: speculative method "
            "eagle3 with the drafter's eagle_aux_hidden_state_layer_ids.)")
