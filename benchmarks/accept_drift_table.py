"""The drift-to-accept-length table of docs/accept.md: predicted AL per serving drift, tiny trained target.

Uses the fixture of the accept tests (tests/helpers/accept_validation.py: a tiny byte-level Llama target and
an EAGLE-3 drafter trained on its states; built into ROOT/fixture, or reused from there). The train
dump is the fp32 capture of the given sequences at the drafter's taps; each row's serve dump applies
one drift: the target run in bf16 / fp16, its weights fake-quantized (alignprobe/quant.py: fp8, int8,
int4 group 128), bf16 kernel noise (the target in bf16 at batch 1; against the same fp32 train dump), taps
shifted by +-1, the final state only, each tapped state rotated by a seeded random orthogonal matrix.
Per row: compare's drift on the aux stream (worst slice rel-RMS, cosine p1) and accept's prediction.

    python benchmarks/accept_drift_table.py ROOT [--vllm vllm.json]   # vllm.json: tests/engines/test_accept_vllm.py ROOT output
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

from accept_validation import CASES, build, capture, drafter_variant, prompts  # noqa: E402

ROWS = ("clean", "bf16_kernel_noise", "target_bf16", "target_fp16", "fp8", "int8", "int4",
        "ids_plus1", "ids_minus1", "final_only", "rotation")


def serve_dump(name, model, sequences, root, clean_train_bf16):
    path = os.path.join(root, f"serve-{name}.h5")
    if name in ("clean", "ids_plus1", "ids_minus1", "final_only", "target_bf16"):
        return capture(model, sequences, path, CASES[name])
    if name == "target_fp16":
        return capture(model, sequences, path, {"ids": CASES["clean"]["ids"], "dtype": "float16"})
    if name in ("fp8", "int8", "int4"):
        from alignprobe.quant import simulate_weight_quant

        quantized = simulate_weight_quant(copy.deepcopy(model), name, group_size=128)
        return capture(quantized, sequences, path, CASES["clean"])
    if name == "bf16_kernel_noise":
        from alignprobe.probes.hf import capture_hf
        from alignprobe.probes.prompts import Prompt

        items = [Prompt(f"s{i:02d}", s) for i, s in enumerate(sequences)]
        return capture_hf(copy.deepcopy(model), items, path, layers="eagle3", aux_layers=CASES["clean"]["ids"],
                          dtype="bfloat16", overwrite=True, progress=False, batch_size=1)
    if name == "rotation":
        from alignprobe.dump import DumpWriter, Provenance, open_dump

        clean = capture(model, sequences, os.path.join(root, "rot-src.h5"), CASES["clean"])
        h = model.config.hidden_size
        q, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((h, h)))
        with open_dump(clean) as src, DumpWriter(path, Provenance(engine="rotated"), {"eagle3_aux": src.streams["eagle3_aux"]}) as w:
            for i, sid in enumerate(src.sample_ids):
                states = src.states(i, "eagle3_aux").reshape(-1, 3, h) @ q.astype(np.float32)
                w.add(sid, src.token_ids(i), {"eagle3_aux": states.reshape(len(states), -1)})
        return path
    raise ValueError(name)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("root")
    parser.add_argument("--vllm", help="JSON from tests/engines/test_accept_vllm.py ROOT: measured beside predicted")
    parser.add_argument("--prompts", type=int, default=8)
    args = parser.parse_args()
    torch.set_num_threads(2)
    import alignprobe

    model, target, drafter = build(os.path.join(args.root, "fixture"))
    vllm = json.load(open(args.vllm)) if args.vllm else {}
    prompt_ids = prompts(args.prompts)
    if "clean" in vllm and "sequences" in vllm["clean"]:
        sequences = vllm["clean"]["sequences"]
    else:  # the target's own greedy continuation (what vLLM generates at temperature 0)
        with torch.no_grad():
            sequences = [model.generate(torch.tensor([p]), max_new_tokens=48, do_sample=False)[0].tolist() for p in prompt_ids]
    train = capture(model, sequences, os.path.join(args.root, "train.h5"), CASES["clean"])
    table = {}
    for name in ROWS:
        serve = serve_dump(name, model, sequences, args.root, None)
        base = CASES.get(name, CASES["clean"])
        variant = drafter_variant(drafter, os.path.join(args.root, f"drafter-{name}"), base)
        compared = alignprobe.compare(train, serve)
        aux = [p for p in compared.streams if p.role == "drafter_input"]
        rel = max((s.rel_rms for p in aux for s in p.slices), default=float("nan"))
        cos = min((s.cosine_p1 for p in aux for s in p.slices), default=float("nan"))
        # the walk starts where the engine starts drafting: at the first generated token
        result = alignprobe.accept(variant, train, serve, target=target, compare_result=compared, score_from=len(prompt_ids[0]) - 1)
        row = {"rel_rms": rel, "cosine_p1": cos, "predicted_al": result.serve.accept_length if result.serve else None,
               "predicted_pos": result.serve.per_position if result.serve else None, "train_al": result.train.accept_length,
               "explained_by": result.explained_by, "verdict": compared.verdict}
        if name in vllm:
            row.update({k: vllm[name][k] for k in ("measured_al", "measured_pos") if k in vllm[name]})
        table[name] = row
        print(name, json.dumps(row), flush=True)
    print("TABLE", json.dumps(table))


if __name__ == "__main__":
    main()
