"""Run vLLM's extract_hidden_states over a prompt set; runs in vLLM's Python (not alignprobe's).

    python alignprobe_vllm_driver.py REQUEST.json RESULT.json

REQUEST: ``{"model", "prompts": [[token ids], ...], "layer_ids", "storage_dir", "engine_kwargs"}``.
RESULT: ``{"paths": [one safetensors file per prompt, in order], "vllm_version", "dtype",
"start_s", "generate_s"}``, or ``{"error": "one line"}`` when vLLM fails. The engine's own log goes to
stderr. The CPU-safe connector (alignprobe_vllm_connector.py, beside this file) is loaded by module
path, so this folder must be on PYTHONPATH (the engine core is a spawned process).
"""

import time

CONNECTOR_MODULE = "alignprobe_vllm_connector"
CONNECTOR_CLASS = "CpuSafeHiddenStatesConnector"


def speculative_config(layer_ids):
    return {
        "method": "extract_hidden_states",
        "num_speculative_tokens": 1,
        "draft_model_config": {"hf_config": {"eagle_aux_hidden_state_layer_ids": [int(i) for i in layer_ids]}},
    }


def transfer_config(storage_dir):
    return {
        "kv_connector": CONNECTOR_CLASS,
        "kv_connector_module_path": CONNECTOR_MODULE,
        "kv_role": "kv_producer",
        "kv_connector_extra_config": {"shared_storage_path": storage_dir},
    }


def run(request):
    import vllm
    from vllm import LLM, SamplingParams

    started = time.monotonic()
    llm = LLM(
        model=request["model"],
        speculative_config=speculative_config(request["layer_ids"]),
        kv_transfer_config=transfer_config(request["storage_dir"]),
        **request.get("engine_kwargs", {}),
    )
    start_s = time.monotonic() - started
    try:
        dtype = str(llm.llm_engine.model_config.dtype).replace("torch.", "")
    except AttributeError:
        dtype = ""
    started = time.monotonic()
    outputs = llm.generate(
        [{"prompt_token_ids": [int(t) for t in ids]} for ids in request["prompts"]],
        SamplingParams(max_tokens=1, temperature=0.0),
        use_tqdm=False,
    )
    generate_s = time.monotonic() - started
    paths = [(getattr(o, "kv_transfer_params", None) or {}).get("hidden_states_path") for o in outputs]
    return {"paths": paths, "vllm_version": vllm.__version__, "dtype": dtype, "start_s": start_s,
            "generate_s": generate_s}


def main():
    from alignprobe_driver_io import serve  # beside this file: the script's folder is first on sys.path

    serve(run)

if __name__ == "__main__":  # the engine core starts with spawn: this guard is required
    main()
