"""The cost of ``alignprobe.accept`` per 1K tokens, against a plain forward of the drafter, same run.

A Kimi-shaped EAGLE-3 drafter (hidden 7168, 64 heads of 128, 8 KV heads, MLP 18432, draft vocab
32000, target vocab 163840; the AQ-MedAI Kimi-K2 drafter's shapes) with random weights, fed a
dump of random 3 x 7168 aux states. Rows:
  plain     one drafter forward over the tokens (fc, the decoder layer, norm, lm_head): what an engine
            spends on the first draft step of a prefill of the same tokens
  chain     the k-step draft chain accept runs (k forwards, the later ones attending to the chain)
  accept    alignprobe.accept end to end on one dump: read, chain, d2t mapping, tally
Ratios are against ``plain`` measured in this process. ``--embed-rows``: the embedding table's rows
(the cost is a gather; a smaller table saves memory on a CPU box and changes no timing).

    python benchmarks/accept_cost.py --tokens 512 --repeats 2              # CPU here
    python benchmarks/accept_cost.py --device cuda --tokens 4096
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np
import torch

KIMI = {"hidden_size": 7168, "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128,
        "intermediate_size": 18432, "draft_vocab_size": 32000, "target_vocab": 163840}


def kimi_checkpoint(embed_rows: int, dtype: torch.dtype, device: str, seed: int = 0):
    from alignprobe.accept.checkpoint import LAYOUT_SPECFORGE, DrafterCheckpoint

    g = torch.Generator(device=device).manual_seed(seed)
    h, nh, nkv, hd, inter, dv = (KIMI[k] for k in ("hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim",
                                                  "intermediate_size", "draft_vocab_size"))

    def lin(out, inp):
        return (torch.randn(out, inp, generator=g, device=device, dtype=dtype) / inp ** 0.5)

    weights = {
        "fc.weight": lin(h, 3 * h), "layer.input_layernorm.weight": torch.ones(h, device=device, dtype=dtype),
        "layer.hidden_norm.weight": torch.ones(h, device=device, dtype=dtype),
        "layer.post_attention_layernorm.weight": torch.ones(h, device=device, dtype=dtype),
        "layer.self_attn.q_proj.weight": lin(nh * hd, 2 * h), "layer.self_attn.k_proj.weight": lin(nkv * hd, 2 * h),
        "layer.self_attn.v_proj.weight": lin(nkv * hd, 2 * h), "layer.self_attn.o_proj.weight": lin(h, nh * hd),
        "layer.mlp.gate_proj.weight": lin(inter, h), "layer.mlp.up_proj.weight": lin(inter, h),
        "layer.mlp.down_proj.weight": lin(h, inter), "norm.weight": torch.ones(h, device=device, dtype=dtype),
        "lm_head.weight": lin(dv, h), "embed_tokens.weight": lin(embed_rows, h),
    }
    keep = torch.randperm(KIMI["target_vocab"], generator=torch.Generator().manual_seed(seed))[:dv].sort().values
    t2d = torch.zeros(KIMI["target_vocab"], dtype=torch.bool)
    t2d[keep] = True
    config = {"rope_theta": 50000.0, "max_position_embeddings": 131072}
    return DrafterCheckpoint(
        path="(kimi-shaped, random)", layout=LAYOUT_SPECFORGE, config={}, weights=weights, d2t=keep - torch.arange(dv), t2d=t2d,
        layer_ids=(2, 30, 58), hidden_size=h, target_hidden_size=h, num_heads=nh, num_kv_heads=nkv, head_dim=hd,
        rms_norm_eps=1e-6, draft_vocab_size=dv, target_vocab_size=KIMI["target_vocab"], layer_config=config)


def write_dump(path: str, tokens: int, sample_len: int, embed_rows: int) -> str:
    from alignprobe.dump import ROLE_DRAFTER_INPUT, DumpWriter, Provenance, StreamClaim

    h = KIMI["hidden_size"]
    claim = StreamClaim((2, 30, 58), h, 61, "bfloat16", role=ROLE_DRAFTER_INPUT)
    rng = np.random.default_rng(0)
    with DumpWriter(path, Provenance(engine="benchmark"), {"aux": claim}) as writer:
        for i in range(tokens // sample_len):
            writer.add(f"s{i}", rng.integers(0, embed_rows, sample_len), {"aux": rng.standard_normal((sample_len, 3 * h), dtype=np.float32)})
    return path


def timed(fn, repeats: int, sync) -> float:
    best = float("inf")
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=1024)
    parser.add_argument("--sample-len", type=int, default=512)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--embed-rows", type=int, default=None, help="default: the full 163840 on a GPU, 32768 on CPU")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    from alignprobe.accept import accept
    from alignprobe.accept.drafter import Eagle3Drafter
    from alignprobe.dump import open_dump

    dtype = torch.float32  # what accept runs the drafter in
    embed_rows = args.embed_rows or (KIMI["target_vocab"] if args.device != "cpu" else 32768)
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    ckpt = kimi_checkpoint(embed_rows, dtype, args.device)
    drafter = Eagle3Drafter(ckpt, ckpt.weights["embed_tokens.weight"], device=args.device, dtype=dtype)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        path = write_dump(os.path.join(tmp, "aux.h5"), args.tokens, args.sample_len, embed_rows)
        with open_dump(path) as dump:
            samples = [(torch.from_numpy(dump.token_ids(i).astype(np.int64)), torch.from_numpy(dump.states(i, "aux")))
                       for i in range(dump.num_samples)]

        def plain():
            with torch.no_grad():
                for tokens, states in samples:
                    drafter.chain(tokens.to(args.device), states.to(args.device), 1)

        def chain():
            for tokens, states in samples:
                drafter.chain_logits(tokens.to(args.device), states.to(args.device), args.k)

        def end_to_end():
            accept(ckpt, path, None, num_draft_tokens=args.k, device=args.device, explain=False)

        plain()  # warm-up (allocations, kernels)
        rows = {"plain": timed(plain, args.repeats, sync), "chain": timed(chain, args.repeats, sync),
                "accept": timed(end_to_end, args.repeats, sync)}
    per_k = 1000.0 / args.tokens
    device = torch.cuda.get_device_name() if args.device.startswith("cuda") else f"cpu x{torch.get_num_threads()} threads"
    print(f"accept cost, Kimi-shaped drafter H=7168, {args.tokens} tokens in samples of {args.sample_len}, k={args.k}, "
          f"float32 on {device}")
    for name, seconds in rows.items():
        print(f"  {name:<7} {seconds * per_k:8.3f} s per 1K tokens   {seconds / rows['plain']:6.2f} x plain")
    print(json.dumps({"tokens": args.tokens, "k": args.k, "device": device,
                      **{f"{n}_s_per_1k": s * per_k for n, s in rows.items()}}))


if __name__ == "__main__":
    sys.exit(main())
