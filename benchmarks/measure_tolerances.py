"""Measure the drift that precision and quantization settings produce, to choose the policy defaults.

For each tiny trained model (DeepseekV3- and Llama-shaped, several seeds) a train dump is captured
the way an extractor would (bfloat16, batch size 4), then serve dumps of the same prompts under each
setting: bfloat16 at other batch sizes, float16, float32, and simulated INT8 / FP8 / INT4 weight
quantization in bfloat16. ``alignprobe.compare`` measures every pair; the per-slice rel-RMS,
cosine p1, norm ratio and position growth of every layer (and of the EAGLE-3 aux slices) are written
to a JSON file and summarised as the table in docs/policy.md.

    python benchmarks/measure_tolerances.py --out benchmarks/results/tolerances.json
    python benchmarks/measure_tolerances.py --from-json benchmarks/results/tolerances.json   # table only

Takes about a minute on 2 idle CPU cores (most of it training the tiny models).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import tempfile
import time

SETTINGS = (
    # (name, dtype, batch size, quantization scheme)
    ("bfloat16, other batch size", "bfloat16", 1, None),
    ("bfloat16, batch size 8", "bfloat16", 8, None),
    ("float16 vs bfloat16", "float16", 4, None),
    ("float32 vs bfloat16", "float32", 4, None),
    ("int8 weights", "bfloat16", 4, "int8"),
    ("fp8 weights", "bfloat16", 4, "fp8"),
    ("int4 weights", "bfloat16", 4, "int4"),
)


def measure(archs, seeds, num_layers, hidden_size, train_steps, num_samples, work_dir):
    from alignprobe.compare import compare
    from alignprobe.probes.hf import capture_hf
    from alignprobe.quant import simulate_weight_quant
    from alignprobe.demo.scenarios import scenario_model, scenario_prompts

    runs = []
    for arch in archs:
        for seed in seeds:
            started = time.time()
            model = scenario_model(arch, num_layers, hidden_size, seed, train_steps)
            prompts = scenario_prompts(num_samples, seed + 1)
            train = os.path.join(work_dir, f"{arch}-{seed}-train.h5")
            capture_hf(copy.deepcopy(model), prompts, train, batch_size=4, dtype="bfloat16", progress=False)
            for name, dtype, batch, scheme in SETTINGS:
                serve_model = copy.deepcopy(model)
                if scheme:
                    simulate_weight_quant(serve_model, scheme, group_size=128)
                serve = os.path.join(work_dir, f"{arch}-{seed}-{name.replace(' ', '_').replace(',', '')}.h5")
                capture_hf(serve_model, prompts, serve, batch_size=batch, dtype=dtype, progress=False)
                result = compare(train, serve)  # the default policy: its findings are recorded too
                aux = next(s for s in result.streams if s.role == "drafter_input")
                layers = [s for s in result.streams if s.serve_stream == "layers"]
                mapping = next(m for m in result.mappings if m.serve_stream == aux.serve_stream)
                runs.append(
                    {
                        "arch": arch,
                        "seed": seed,
                        "setting": name,
                        "verdict": result.verdict,
                        "findings": [f"{f.code}:{f.severity}@{f.stream}" for f in result.findings],
                        "aux": [_numbers(m) for m in aux.slices],
                        "aux_margins": [m.margin for m in mapping.matches],
                        "layers": [_numbers(m) for m in layers[0].slices] if layers else [],
                    }
                )
            print(f"{arch} seed {seed}: {time.time() - started:.0f} s", file=sys.stderr)
    return runs


def _numbers(m):
    return {
        "label": m.label,
        "rel_rms": m.rel_rms,
        "cosine_mean": m.cosine_mean,
        "cosine_p1": m.cosine_p1,
        "norm_ratio": m.norm_ratio,
        "position_growth": _growth(m),
    }


def _growth(m):
    """rel-RMS of the last well-filled position bucket over positions 1-15 (what position_drift tests)."""
    early = [b for b in m.positions if 1 <= b.start < 16]
    late = [b for b in m.positions if b.start >= 16 and b.tokens >= max(16, m.tokens // 100)]
    if not early or not late:
        return None
    base = (sum(b.rel_rms**2 * b.tokens for b in early) / sum(b.tokens for b in early)) ** 0.5
    return late[-1].rel_rms / base if base > 0 else None


def _slices(runs, name):
    """Every compared layer of the runs of one setting: HF[1..N] (HF[0], the embedding, never drifts)."""
    return [x for r in runs if r["setting"] == name for x in r["layers"] if x["label"] != "HF[0]"]


def summarise(runs):
    """Per setting, over every layer HF[1..N] of every run: rel-RMS median / p95 / max, cosine p1,
    norm ratio, position growth; and the aux mapping margins and default verdicts."""
    table = {}
    for name, *_ in SETTINGS:
        slices = _slices(runs, name)
        rel = sorted(x["rel_rms"] for x in slices)
        p1 = sorted(x["cosine_p1"] for x in slices)
        ratio = [x["norm_ratio"] for x in slices]
        growth = [x["position_growth"] for x in slices if x["position_growth"]]
        margins = [m for r in runs if r["setting"] == name for m in r["aux_margins"]]
        verdicts = [r["verdict"] for r in runs if r["setting"] == name]
        if not rel:
            continue
        table[name] = {
            "slices": len(rel),
            "rel_rms_median": statistics.median(rel),
            "rel_rms_p95": rel[min(len(rel) - 1, round(0.95 * (len(rel) - 1)))],
            "rel_rms_max": rel[-1],
            "cosine_p1_median": statistics.median(p1),
            "cosine_p1_min": p1[0],
            "norm_ratio_max_dev": max(abs(x - 1) for x in ratio),
            "position_growth_max": max(growth) if growth else None,
            "mapping_margin_min": min(margins),
            "verdicts": {v: verdicts.count(v) for v in sorted(set(verdicts))},
        }
    return table


def markdown(table):
    lines = [
        "| setting (serve vs bf16 batch-4 train) | layers | rel-RMS median | rel-RMS p95 | rel-RMS max "
        "| cosine p1 median | cosine p1 min | max abs(norm ratio - 1) | max position growth | min mapping margin "
        "| default verdicts |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, t in table.items():
        lines.append(
            f"| {name} | {t['slices']} | {t['rel_rms_median']:.4f} | {t['rel_rms_p95']:.4f} | {t['rel_rms_max']:.4f} | "
            f"{t['cosine_p1_median']:.5f} | {t['cosine_p1_min']:.5f} | {t['norm_ratio_max_dev']:.4f} | "
            f"{t['position_growth_max'] or float('nan'):.2f} | {t['mapping_margin_min']:.4f} | "
            f"{', '.join(f'{v} x{n}' for v, n in t['verdicts'].items())} |"
        )
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="benchmarks/results/tolerances.json")
    parser.add_argument("--archs", default="deepseek_v3,llama")
    parser.add_argument("--seeds", default="0,1,2,3,4")
    parser.add_argument("--num-layers", type=int, default=8)
    parser.add_argument("--hidden-size", type=int, default=64)
    parser.add_argument("--train-steps", type=int, default=60)
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--from-json", help="Summarise the runs of an earlier --out file instead of measuring.")
    args = parser.parse_args(argv)
    if args.from_json:
        with open(args.from_json) as fh:
            print(markdown(summarise(json.load(fh)["runs"])))
        return
    with tempfile.TemporaryDirectory(prefix="alignprobe-tolerances-") as work:
        runs = measure(
            args.archs.split(","), [int(s) for s in args.seeds.split(",")], args.num_layers, args.hidden_size,
            args.train_steps, args.samples, work,
        )
    table = summarise(runs)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump({"settings": table, "runs": runs, "args": vars(args)}, fh, indent=1)
    print(markdown(table))


if __name__ == "__main__":
    main()
