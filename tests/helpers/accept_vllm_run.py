"""Run vLLM's own EAGLE-3 speculative decoding and print its acceptance counters as one JSON line.

Runs under the vLLM venv's python (it imports vllm, not alignprobe):
    python accept_vllm_run.py CASES.json
CASES.json: {"target": DIR, "prompts": [[ids...], ...], "new_tokens": 64, "k": 3,
             "cases": [{"name": ..., "drafter": DIR, "dtype": "float32"}, ...]}
Each case is a fresh LLM (engine start ~20-30 s); counters from LLM.get_metrics() (REAL_ENGINES.md).
"""

import json
import os
import sys


def counters(llm) -> dict:
    out = {"drafts": 0, "draft_tokens": 0, "accepted": 0, "per_pos": []}
    for metric in llm.get_metrics():
        name = metric.name
        if name == "vllm:spec_decode_num_drafts":
            out["drafts"] = int(metric.value)
        elif name == "vllm:spec_decode_num_draft_tokens":
            out["draft_tokens"] = int(metric.value)
        elif name == "vllm:spec_decode_num_accepted_tokens":
            out["accepted"] = int(metric.value)
        elif name == "vllm:spec_decode_num_accepted_tokens_per_pos":
            out["per_pos"] = [int(v) for v in metric.values]
    return out


def main() -> None:
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    from vllm import LLM, SamplingParams

    spec = json.load(open(sys.argv[1]))
    results = []
    for case in spec["cases"]:
        llm = LLM(model=spec["target"], dtype=case.get("dtype", "float32"), max_model_len=1024, enforce_eager=True,
                  disable_log_stats=False, seed=0,
                  speculative_config={"method": "eagle3", "model": case["drafter"], "num_speculative_tokens": spec["k"]})
        params = SamplingParams(max_tokens=spec["new_tokens"], temperature=0, ignore_eos=True)
        outs = llm.generate([{"prompt_token_ids": p} for p in spec["prompts"]], params, use_tqdm=False)
        c = counters(llm)
        c["name"] = case["name"]
        c["outputs"] = [list(o.outputs[0].token_ids) for o in outs]
        c["accept_length"] = 1 + c["accepted"] / c["drafts"] if c["drafts"] else None
        c["per_position"] = [a / c["drafts"] for a in c["per_pos"]] if c["drafts"] else []
        results.append(c)
        print("CASE", json.dumps({k: v for k, v in c.items() if k != "outputs"}), flush=True)
        del llm
        import gc

        gc.collect()
    print("RESULT", json.dumps(results), flush=True)


if __name__ == "__main__":
    main()
