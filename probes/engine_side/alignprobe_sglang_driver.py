"""Run an offline ``sglang.Engine`` over a prompt set; runs in SGLang's Python (not alignprobe's).

    python alignprobe_sglang_driver.py REQUEST.json RESULT.json

REQUEST: ``{"model", "prompts": [[token ids], ...], "engine_kwargs", "out_dir", "max_new_tokens",
"batch_size"}``. Each prompt's prefill rows (``meta_info["hidden_states"][0]``) go to
``out_dir/{i}.npy`` as float32 (exact for any server dtype; the Engine answers Python floats).
RESULT: ``{"files": [path, or null when the answer held no hidden states], "cached_tokens",
"server_info", "sglang_version", "start_s", "generate_s"}``, or ``{"error": "one line"}``.
"""

import json
import os
import time


def run(request):
    import numpy as np
    import sglang

    started = time.monotonic()
    engine = sglang.Engine(model_path=request["model"], **request.get("engine_kwargs", {}))
    start_s = time.monotonic() - started
    try:
        info = json.loads(json.dumps(engine.get_server_info(), default=str))
        prompts = request["prompts"]
        batch = max(1, int(request.get("batch_size", 8)))
        sampling = {"max_new_tokens": int(request.get("max_new_tokens", 1)), "temperature": 0.0}
        files, cached = [], []
        started = time.monotonic()
        for at in range(0, len(prompts), batch):
            chunk = [[int(t) for t in ids] for ids in prompts[at:at + batch]]
            answers = engine.generate(input_ids=chunk, sampling_params=sampling, return_hidden_states=True)
            for i, answer in enumerate(answers, start=at):
                meta = answer.get("meta_info") or {}
                states = meta.get("hidden_states") or []
                cached.append(meta.get("cached_tokens"))
                if not states:
                    files.append(None)
                    continue
                path = os.path.join(request["out_dir"], f"{i}.npy")
                np.save(path, np.asarray(states[0], dtype=np.float32))
                files.append(path)
        generate_s = time.monotonic() - started
    finally:
        engine.shutdown()
    return {"files": files, "cached_tokens": cached, "server_info": info, "sglang_version": sglang.__version__,
            "start_s": start_s, "generate_s": generate_s}


def main():
    from alignprobe_driver_io import serve  # beside this file: the script's folder is first on sys.path

    serve(run, prepare=lambda request: os.makedirs(request["out_dir"], exist_ok=True))


if __name__ == "__main__":  # the engine's scheduler starts with spawn: this guard is required
    main()
