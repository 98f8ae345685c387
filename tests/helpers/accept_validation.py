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
    return run_vllm_spec(python, spec, os.path.join(root, "vllm_cases.json"), cached, root, timeout)


def run_vllm_spec(python: str, spec: dict, spec_path: str, out_path: str, cwd: str, timeout: float,
                  prefix: tuple[str, ...] = ()) -> dict[str, dict]:
    """Run accept_vllm_run.py in vLLM's python on ``spec`` (written to ``spec_path``); its counters by case
    name, kept with the spec at ``out_path`` for the next run of the same spec. ``prefix``: a command
    the run goes under (flock)."""
    json.dump(spec, open(spec_path, "w"))
    script = os.path.join(os.path.dirname(__file__), "accept_vllm_run.py")
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1")
    done = subprocess.run([*prefix, python, script, spec_path], capture_output=True, text=True, timeout=timeout,
                          env=env, cwd=cwd)
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            results = {r["name"]: r for r in json.loads(line[len("RESULT "):])}
            json.dump({"spec": spec, "results": results}, open(out_path, "w"))
            return results
    raise RuntimeError(f"vLLM run failed (rc {done.returncode}): {done.stderr[-3000:]}")


def reduced_vocab_drafter(drafter: str, out: str, keep: list[int], target_vocab: int) -> str:
    """The drafter with a draft vocabulary of the target ids ``keep`` (as SpecForge prunes to the most
    frequent tokens): lm_head rows of those ids, ``d2t`` (target id = draft id + d2t) and ``t2d``."""
    import torch
    from safetensors.torch import load_file, save_file

    keep = sorted(keep)
    weights = load_file(os.path.join(drafter, "model.safetensors"))
    ids = torch.tensor(keep, dtype=torch.long)
    weights["lm_head.weight"] = weights["lm_head.weight"][ids].contiguous()
    weights["d2t"] = ids - torch.arange(len(keep))
    t2d = torch.zeros(target_vocab, dtype=torch.bool)
    t2d[ids] = True
    weights["t2d"] = t2d
    config = json.load(open(os.path.join(drafter, "config.json")))
    config["draft_vocab_size"] = len(keep)
    config["vocab_size"] = target_vocab
    os.makedirs(out, exist_ok=True)
    save_file(weights, os.path.join(out, "model.safetensors"))
    with open(os.path.join(out, "config.json"), "w") as fh:
        json.dump(config, fh, indent=2)
    return out


def normed_drafter(drafter: str, out: str, kind: str, aux_rms: list[float], seed: int = 0) -> str:
    """The drafter with a pre-fc norm vLLM applies: ``norm_before_fc`` (``input_norm`` over the 3H
    concat) or ``fc_norm`` (one norm per tapped state). The norm weights are the tapped states'
    RMS times a seeded per-channel factor in [0.5, 1.5]: fc then sees states of about their
    trained size, but not the same ones, so serving with or without the norm scores differently."""
    import torch
    from safetensors.torch import load_file, save_file

    weights = load_file(os.path.join(drafter, "model.safetensors"))
    h = weights["norm.weight"].shape[0]
    g = torch.Generator().manual_seed(seed)
    factors = [0.5 + torch.rand(h, generator=g) for _ in aux_rms]
    config = json.load(open(os.path.join(drafter, "config.json")))
    if kind == "norm_before_fc":
        overall = float(np.sqrt(np.mean(np.square(aux_rms))))
        weights["input_norm.weight"] = (overall * torch.cat(factors)).contiguous()
        config["norm_before_fc"] = True
        config["eagle_config"]["norm_before_fc"] = True
    elif kind == "fc_norm":
        for i, (rms, factor) in enumerate(zip(aux_rms, factors)):
            weights[f"fc_norm.{i}.weight"] = (rms * factor).contiguous()
        config["fc_norm"] = True
    else:
        raise ValueError(kind)
    os.makedirs(out, exist_ok=True)
    save_file(weights, os.path.join(out, "model.safetensors"))
    with open(os.path.join(out, "config.json"), "w") as fh:
        json.dump(config, fh, indent=2)
    return out


def sample_continuations(model, prompt_ids, new_tokens: int, temperature: float, seed: int) -> list[list[int]]:
    """Prompt + ``new_tokens`` drawn from the target at ``temperature`` (no top-k / top-p, as the engine
    runs with SamplingParams(temperature=T)): the text an engine sampling at T drafts on."""
    import torch

    g = torch.Generator().manual_seed(seed)
    x = torch.tensor(prompt_ids)
    with torch.no_grad():
        for _ in range(new_tokens):
            logits = model(input_ids=x).logits[:, -1].double()
            nxt = torch.multinomial((logits / temperature).softmax(-1), 1, generator=g)
            x = torch.cat([x, nxt], dim=1)
    return x.tolist()
