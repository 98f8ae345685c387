"""`alignprobe accept` against real engines: vLLM's own EAGLE-3 counters beside the prediction, per case.

Re-run with the engine venvs (about 15-25 minutes on 2 CPU cores, most of it the fixture's training
and vLLM engine starts; every engine run under ``flock /work/engines/run.lock`` when that file's
folder exists, so only one engine runs at a time on a shared box):

    ALIGNPROBE_ENGINE_VENVS=/work/engines python benchmarks/accept_validation.py ROOT [--faults] [--sglang]

ROOT/fixture: the tiny target and trained drafter of the accept tests (tests/helpers/accept_validation.py
``build``; reused when present). Configurations:
  greedy            temperature 0; the dumps hold vLLM's greedy continuations (the target's own tokens)
  t=T               SamplingParams(temperature=T, seed=i) for request i. vLLM is run twice: as shipped, and with its
                    CPU per-token expansion replaced (tests/helpers/accept_vllm_run.py says why). The
                    prediction never sees the engine's text: its dumps hold continuations the target
                    sampled at T in transformers (other seeds, ``--samples`` per prompt).
  draft vocab N     the drafter pruned to the N target ids most frequent in the drafter's training text
                    (d2t / t2d), greedy and t=0.7
  norm_before_fc    an input_norm over the 3H concat, read by vLLM from eagle_config (greedy)
  fc_norm           one norm per tapped state (greedy)
  faults (--faults) the planted serving faults of tests/helpers/accept_validation.py CASES (greedy)
Beside vLLM's metrics, two independent counts: "steps" from the tokens each engine step emitted
(1 + accepted; each request's first and last step left out: prefill, and a step cut by max_tokens),
and "walk" = accept's walk over a dump of vLLM's own emitted text (exact when the drafter forward
matches: vLLM accepts a draft exactly when its emitted token equals it).
Prints the table as markdown and writes ROOT/accept_validation.json.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "helpers"))

from accept_validation import (  # noqa: E402
    CASES, build, capture, drafter_variant, normed_drafter, prompts, reduced_vocab_drafter, run_vllm_spec,
    sample_continuations, vllm_python)

TEMPERATURES = (0.3, 0.7, 1.0)
FAULTS = ("ids_plus1", "ids_minus1", "late_taps", "final_only", "target_bf16")
LOCK = "/work/engines/run.lock"


def run_vllm(python, target, prompt_ids, new_tokens, k, cases, root, name):
    spec = {"target": target, "prompts": prompt_ids, "new_tokens": new_tokens, "k": k, "cases": cases, "seeds": "seed + request"}
    spec_path = os.path.join(root, f"vllm_{name}.json")
    out_path = os.path.join(root, f"vllm_{name}_result.json")
    if os.path.exists(out_path):
        found = json.load(open(out_path))
        if found.get("spec") == spec:  # engine runs take minutes: reuse a run of the same spec
            return found["results"]
    prefix = ("flock", LOCK) if os.path.isdir(os.path.dirname(LOCK)) else ()
    return run_vllm_spec(python, spec, spec_path, out_path, root, 3600, prefix)


def step_count(steps: list[list[int]]) -> dict:
    """Accept length from the tokens each engine step emitted (decode steps only, the last left out)."""
    drafts = accepted = 0
    for per_request in steps:
        for emitted in per_request[1:-1]:
            drafts += 1
            accepted += emitted - 1
    return {"drafts": drafts, "accept_length": 1 + accepted / drafts if drafts else None}


def predict(drafter, model, sequences, root, tag, target, k, score_from, temperature=0.0, case=None):
    import alignprobe

    train = capture(model, sequences, os.path.join(root, f"{tag}-train.h5"), CASES["clean"])
    serve = train if case is None or case == CASES["clean"] else capture(model, sequences, os.path.join(root, f"{tag}-serve.h5"), case)
    result = alignprobe.accept(drafter, train, serve, target=target, num_draft_tokens=k, temperature=temperature,
                               score_from=score_from)
    side = result.serve
    return {"al": side.accept_length, "pos": side.per_position, "drafts": side.drafts,
            "expected_al": side.sampled_accept_length, "expected_pos": side.sampled_per_position,
            "explained_by": result.explained_by}


def frequent_ids(model, count: int, seed: int = 1000) -> list[int]:
    """The ``count`` target ids most frequent among the target's greedy tokens on the drafter's training text."""
    from alignprobe.demo import tiny_drafter

    with torch.no_grad():
        greedy = model(input_ids=tiny_drafter.pair_corpus(128, 64, seed=seed)).logits.argmax(-1)
    counts = collections.Counter(greedy.flatten().tolist())
    return [i for i, _ in counts.most_common(count)]


def aux_rms(model, ids) -> list[float]:
    from alignprobe.demo import tiny_drafter

    with torch.no_grad():
        out = model(input_ids=tiny_drafter.pair_corpus(32, 64, seed=1000), output_hidden_states=True)
    return [float(out.hidden_states[i].pow(2).mean().sqrt()) for i in ids]


def sglang_attempt(root, target, drafter) -> str:
    """Try SGLang's EAGLE3 speculative decoding on this CPU; the last error line when it does not run."""
    venvs = os.environ.get("ALIGNPROBE_ENGINE_VENVS", "")
    python = os.path.join(venvs, "sglang", "bin", "python")
    if not os.path.exists(python):
        return f"no SGLang venv at {python}"
    script = os.path.join(os.path.dirname(__file__), "..", "tests", "helpers", "accept_sglang_run.py")
    command = [python, script, target, drafter]
    if os.path.isdir(os.path.dirname(LOCK)):
        command = ["flock", LOCK] + command
    env = dict(os.environ, SGLANG_USE_CPU_ENGINE="1", OMP_NUM_THREADS="1")
    stub = os.path.join(venvs, "sglang", "libcuda-stub")  # the one-symbol libcuda of the SGLang install
    if os.path.isdir(stub):
        env["LD_LIBRARY_PATH"] = stub + ":" + env.get("LD_LIBRARY_PATH", "")
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=root, timeout=900)
    except subprocess.TimeoutExpired:
        return "timed out after 900 s"
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return line[len("RESULT "):]
    errors = [ln for ln in done.stderr.splitlines() if "Error" in ln or "error" in ln]
    return f"rc {done.returncode}: {(errors or done.stderr.splitlines() or ['no output'])[-1].strip()}"


def row(engine, configuration, measured, predicted, extra=None) -> dict:
    out = {"engine": engine, "configuration": configuration,
           "measured_al": measured.get("accept_length"), "measured_pos": measured.get("per_position"),
           "predicted_al": predicted["al"] if predicted else None, "predicted_pos": predicted["pos"] if predicted else None,
           "drafts": measured.get("drafts")}
    if predicted and out["measured_al"] is not None:
        out["difference"] = out["predicted_al"] - out["measured_al"]
        out["max_pos_difference"] = max(abs(a - b) for a, b in zip(out["predicted_pos"], out["measured_pos"]))
    out.update(extra or {})
    return out


def fmt(x, digits=3):
    return "-" if x is None else (f"{x:+.{digits}f}" if isinstance(x, float) and x < 0 else f"{x:.{digits}f}")


def markdown(rows) -> str:
    lines = ["| engine | configuration | measured AL | predicted AL | difference | measured per position | "
             "predicted per position | max position diff | drafts | steps AL | walk on engine text |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        pos = " / ".join(fmt(p) for p in r["measured_pos"]) if r.get("measured_pos") else "-"
        ppos = " / ".join(fmt(p) for p in r["predicted_pos"]) if r.get("predicted_pos") else "-"
        lines.append(f"| {r['engine']} | {r['configuration']} | {fmt(r['measured_al'])} | {fmt(r['predicted_al'])} | "
                     f"{fmt(r.get('difference'))} | {pos} | {ppos} | {fmt(r.get('max_pos_difference'))} | {r.get('drafts', '-')} | "
                     f"{fmt(r.get('steps_al'))} | {fmt(r.get('walk_al'))} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("root")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--samples", type=int, default=4, help="transformers continuations per prompt for a sampled prediction")
    parser.add_argument("-k", type=int, default=3)
    parser.add_argument("--draft-vocab", type=int, default=128)
    parser.add_argument("--faults", action="store_true", help="also the planted-fault cases (greedy)")
    parser.add_argument("--sglang", action="store_true", help="also try SGLang's EAGLE3 decoding")
    args = parser.parse_args()
    torch.set_num_threads(2)
    root = os.path.abspath(args.root)
    os.makedirs(root, exist_ok=True)
    python = vllm_python()
    if python is None:
        sys.exit("no vLLM venv: set ALIGNPROBE_ENGINE_VENVS to the folder holding vllm/ (tests/helpers/engine_helpers.py)")
    model, target, drafter = build(os.path.join(root, "fixture"))
    prompt_ids = prompts(args.prompts)
    score_from = len(prompt_ids[0]) - 1
    vocab = model.config.vocab_size
    drafters = {"clean": drafter_variant(drafter, os.path.join(root, "drafter-clean"), CASES["clean"])}
    drafters["vocab"] = reduced_vocab_drafter(drafters["clean"], os.path.join(root, "drafter-vocab"),
                                              frequent_ids(model, args.draft_vocab), vocab)
    rms = aux_rms(model, CASES["clean"]["ids"])
    for kind in ("norm_before_fc", "fc_norm"):
        drafters[kind] = normed_drafter(drafters["clean"], os.path.join(root, f"drafter-{kind}"), kind, rms)
    cases = [{"name": "greedy", "drafter": drafters["clean"]}]
    for t in TEMPERATURES:
        cases.append({"name": f"t{t}-shipped", "drafter": drafters["clean"], "temperature": t, "seed": 0})
        cases.append({"name": f"t{t}", "drafter": drafters["clean"], "temperature": t, "seed": 0, "fix_cpu_expand": True})
    cases += [{"name": "vocab-greedy", "drafter": drafters["vocab"]},
              {"name": "vocab-t0.7", "drafter": drafters["vocab"], "temperature": 0.7, "seed": 0, "fix_cpu_expand": True},
              {"name": "norm_before_fc", "drafter": drafters["norm_before_fc"]},
              {"name": "fc_norm", "drafter": drafters["fc_norm"]}]
    if args.faults:
        for name in FAULTS:
            drafters[name] = drafter_variant(drafter, os.path.join(root, f"drafter-{name}"), CASES[name])
            cases.append({"name": name, "drafter": drafters[name], "dtype": CASES[name].get("dtype", "float32")})
    measured = run_vllm(python, target, prompt_ids, args.new_tokens, args.k, cases, root, "cases")

    def engine_text(name):
        return [p + o for p, o in zip(prompt_ids, measured[name]["outputs"])]

    greedy_text = engine_text("greedy")
    sampled_text = {}
    for t in TEMPERATURES:
        sampled_text[t] = [seq for s in range(args.samples)
                           for seq in sample_continuations(model, prompt_ids, args.new_tokens, t, seed=100 + s)]
    rows = []

    def add(configuration, name, drafter_dir, temperature=0.0, case=None, sampled=None):
        m = measured[name]
        text = greedy_text if temperature == 0 else sampled
        p = predict(drafter_dir, model, text, root, f"pred-{name}", target, args.k, score_from, temperature, case)
        walk = predict(drafter_dir, model, engine_text(name), root, f"walk-{name}", target, args.k, score_from, temperature, case)
        extra = {"steps_al": step_count(m["steps"])["accept_length"], "walk_al": walk["al"], "walk_pos": walk["pos"],
                 "expected_al": p["expected_al"], "explained_by": p["explained_by"], "predicted_drafts": p["drafts"]}
        rows.append(row("vLLM 0.32 (cpu)", configuration, m, p, extra))
        print(json.dumps(rows[-1]), flush=True)

    add("greedy", "greedy", drafters["clean"])
    for t in TEMPERATURES:
        add(f"t={t} (CPU expansion fixed)", f"t{t}", drafters["clean"], t, sampled=sampled_text[t])
        add(f"t={t} (as shipped)", f"t{t}-shipped", drafters["clean"], t, sampled=sampled_text[t])
    add(f"draft vocab {args.draft_vocab} of {vocab} (d2t/t2d), greedy", "vocab-greedy", drafters["vocab"])
    add(f"draft vocab {args.draft_vocab} of {vocab} (d2t/t2d), t=0.7", "vocab-t0.7", drafters["vocab"], 0.7, sampled=sampled_text[0.7])
    add("norm_before_fc (eagle_config)", "norm_before_fc", drafters["norm_before_fc"])
    add("fc_norm", "fc_norm", drafters["fc_norm"])
    if args.faults:
        for name in FAULTS:
            add(f"fault: {name} {CASES[name]}", name, drafters[name], case=CASES[name])
    if args.sglang:
        rows.append({"engine": "SGLang 0.5.23 (cpu)", "configuration": "EAGLE3, greedy", "measured_al": None,
                     "predicted_al": None, "note": sglang_attempt(root, target, drafters["clean"])})
        print(json.dumps(rows[-1]), flush=True)
    json.dump(rows, open(os.path.join(root, "accept_validation.json"), "w"), indent=1)
    print(markdown(rows))
    for r in rows:
        if r.get("note"):
            print(f"{r['engine']} {r['configuration']}: {r['note']}")


if __name__ == "__main__":
    main()
