"""The accept-length validation: a trained tiny target and drafter, fault cases, dumps, predictions.

Shared by the reference-loop test (slow suite), the vLLM engine test and the run that fills the
table in docs/accept.md. A case is how the serving side differs: the drafter's layer ids (vLLM
numbering: id k taps HF[k]), aux capture off (the H-wide post-norm final state, fc skipped), or
the target's dtype. The serve dump of a case holds what the engine feeds the drafter in that case,
captured from the same target with transformers on the same token sequences.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np

from alignprobe.demo import tiny_drafter

CLEAN_IDS = (2, 4, 5)
CASES = {
    "clean": {"ids": CLEAN_IDS},
    "ids_minus1": {"ids": (1, 3, 4)},
    "ids_plus1": {"ids": (3, 5, 6)},
    "late_taps": {"ids": (6, 7, 8)},
    "final_only": {"ids": CLEAN_IDS, "use_aux": False},
    "target_bf16": {"ids": CLEAN_IDS, "dtype": "bfloat16"},
}


def build(root, target_steps: int = 200, drafter_steps: int = 60, seed: int = 0):
    """Train (or reuse, when ``root`` already has them) the target and the drafter; returns (model, target, drafter)."""
    from transformers import LlamaForCausalLM

    root = os.fspath(root)
    target, drafter = os.path.join(root, "target"), os.path.join(root, "drafter")
    if not os.path.exists(os.path.join(drafter, "model.safetensors")):
        model = tiny_drafter.train_target(steps=target_steps, seed=seed)
        tiny_drafter.save_target(model, target)
        tiny_drafter.train_drafter(model, drafter, steps=drafter_steps, batch=8, length=64, seed=seed)
    model = LlamaForCausalLM.from_pretrained(target).eval()
    return model, target, drafter


def prompts(num: int = 8, length: int = 24, seed: int = 7) -> list[list[int]]:
    return tiny_drafter.pair_corpus(num, length, seed=seed).tolist()


def drafter_variant(drafter: str, out: str, case: dict) -> str:
    """The drafter folder vLLM is given for ``case``: same weights, the case's ids / use_aux in its config."""
    os.makedirs(out, exist_ok=True)
    shutil.copy(os.path.join(drafter, "model.safetensors"), os.path.join(out, "model.safetensors"))
    config = json.load(open(os.path.join(drafter, "config.json")))
    config["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": list(case["ids"]),
                              "use_aux_hidden_state": case.get("use_aux", True)}
    with open(os.path.join(out, "config.json"), "w") as fh:
        json.dump(config, fh, indent=2)
    return out


def capture(model, sequences: list[list[int]], path: str, case: dict) -> str:
    """The dump of what the engine feeds the drafter in ``case`` (train side: the clean case in fp32)."""
    import copy

    from alignprobe.dump import ROLE_DRAFTER_INPUT, DumpWriter, Provenance, StreamClaim, open_dump
    from alignprobe.probes.hf import capture_hf
    from alignprobe.probes.prompts import Prompt

    items = [Prompt(f"s{i:02d}", s) for i, s in enumerate(sequences)]
    dtype = case.get("dtype", "float32")
    serve_model = copy.deepcopy(model) if dtype != "float32" else model
    n, h = model.config.num_hidden_layers, model.config.hidden_size
    if case.get("use_aux", True) and n in case["ids"]:
        # vLLM id N taps the final state BEFORE the final norm (capture_hf's HF[N] is after it)
        full = capture_hf(serve_model, items, path + ".full.h5", layers="all", dtype=dtype, overwrite=True, progress=False, batch_size=4)
        ids = sorted(set(case["ids"]))
        claim = StreamClaim(tuple(ids), h, n, "float32", final_norm="pre", role=ROLE_DRAFTER_INPUT, note="vLLM ids, id N pre-norm")
        if os.path.exists(path):
            os.remove(path)
        with open_dump(full) as src, DumpWriter(path, Provenance(engine="vllm (simulated by transformers)"), {"hidden_states": claim}) as writer:
            for i, sid in enumerate(src.sample_ids):
                layers = src.states(i, "layers").reshape(-1, n + 1, h)
                parts = [src.states(i, "final_prenorm") if k == n else layers[:, k] for k in ids]
                writer.add(sid, src.token_ids(i), {"hidden_states": np.concatenate(parts, axis=1)})
        os.remove(full)
        return path
    if case.get("use_aux", True):
        return capture_hf(serve_model, items, path, layers="eagle3", aux_layers=case["ids"], dtype=dtype,
                          overwrite=True, progress=False, batch_size=4, provenance={"engine": "vllm (simulated by transformers)"})
    # vLLM with use_aux_hidden_state false: the post-norm final state, H wide, as the drafter's input
    full = capture_hf(model, items, path + ".full.h5", layers="eagle3", overwrite=True, progress=False, batch_size=4)
    claim = StreamClaim((n,), h, n, "float32", role=ROLE_DRAFTER_INPUT, note="vLLM use_aux_hidden_state=false: the final state")
    if os.path.exists(path):
        os.remove(path)
    with open_dump(full) as src, DumpWriter(path, Provenance(engine="vllm (simulated by transformers)"), {"hidden_states": claim}) as writer:
        for i, sid in enumerate(src.sample_ids):
            writer.add(sid, src.token_ids(i), {"hidden_states": src.states(i, "final")})
    os.remove(full)
    return path


def vllm_python() -> str | None:
    """The vLLM venv's python, where the engine tests keep it ($ALIGNPROBE_ENGINE_VENVS/vllm, default
    <repo>/.engines/vllm; tests/helpers/engine_helpers.py), or None when absent."""
    venvs = os.environ.get("ALIGNPROBE_ENGINE_VENVS") or os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), ".engines")
    venv = os.path.join(venvs, "vllm")
    python = os.path.join(venv, "bin", "python")
    return python if os.path.exists(python) else None


def run_vllm(python: str, target: str, drafters: dict[str, str], prompt_ids, new_tokens: int, k: int, root: str,
             timeout: float = 1500) -> dict[str, dict]:
    spec = {"target": target, "prompts": prompt_ids, "new_tokens": new_tokens, "k": k,
            "cases": [{"name": name, "drafter": path, "dtype": CASES[name].get("dtype", "float32")} for name, path in drafters.items()]}
    cached = os.path.join(root, "vllm_measured.json")
    if os.path.exists(cached):  # vLLM runs take minutes: one run's counters serve every later prediction
        found = json.load(open(cached))
        if found.get("spec", {}).get("cases") == spec["cases"] and found["spec"].get("prompts") == prompt_ids:
            return found["results"]
    spec_path = os.path.join(root, "vllm_cases.json")
    json.dump(spec, open(spec_path, "w"))
    script = os.path.join(os.path.dirname(__file__), "accept_vllm_run.py")
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1")
    done = subprocess.run([python, script, spec_path], capture_output=True, text=True, timeout=timeout, env=env, cwd=root)
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            results = {r["name"]: r for r in json.loads(line[len("RESULT "):])}
            json.dump({"spec": spec, "results": results}, open(cached, "w"))
            return results
    raise RuntimeError(f"vLLM run failed (rc {done.returncode}): {done.stderr[-3000:]}")
