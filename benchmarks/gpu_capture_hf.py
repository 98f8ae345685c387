"""End to end: `capture_hf` (forward + offload + DumpWriter + merge) against a plain forward of the
same model and batches, in the same run. Prints tokens/s and each variant's time / forward.

    python benchmarks/gpu_capture_hf.py --hidden 7168 --layers 8 --batch 4 --seq 2048   # on the GPU
    python benchmarks/gpu_capture_hf.py --hidden 256 --layers 8 --batch 2 --seq 128 --device cpu
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

import torch

from alignprobe.probes.hf import capture_hf
from alignprobe.probes.prompts import Prompt


def build_model(hidden: int, layers: int, vocab: int, device: str):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=hidden * 18 // 7, num_hidden_layers=layers,
        num_attention_heads=max(1, hidden // 128), num_key_value_heads=max(1, hidden // 1024),
        max_position_embeddings=8192,
    )
    torch.manual_seed(0)
    with torch.device(device):
        model = LlamaForCausalLM(config).to(torch.bfloat16)
    return model.eval()


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


@torch.inference_mode()
def plain_forward(model, prompts, batch: int, device: str) -> float:
    sync(device)
    start = time.perf_counter()
    for i in range(0, len(prompts), batch):
        ids = torch.tensor([p.token_ids for p in prompts[i : i + batch]], device=device)
        model(input_ids=ids, use_cache=False)
    sync(device)
    return time.perf_counter() - start


def capture(model, prompts, batch: int, device: str, layers: str, folder: str) -> float:
    out = os.path.join(folder, "bench.h5")
    sync(device)
    start = time.perf_counter()
    capture_hf(model, prompts, out, layers=layers, batch_size=batch, progress=False, overwrite=True)
    seconds = time.perf_counter() - start
    size = os.path.getsize(out)
    os.remove(out)
    return seconds, size


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hidden", type=int, default=7168)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--batches", type=int, default=8, help="batches per timed round")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None,
                   help="where the dump is written (default: /dev/shm, memory)")
    p.add_argument("--variants", default="eagle3,all")
    args = p.parse_args()

    model = build_model(args.hidden, args.layers, args.vocab, args.device)
    g = torch.Generator().manual_seed(1)
    prompts = [Prompt(f"p{i}", torch.randint(0, args.vocab, (args.seq,), generator=g).tolist())
               for i in range(args.batch * args.batches)]
    tokens = len(prompts) * args.seq
    folder = tempfile.mkdtemp(dir=args.dir)
    try:
        plain_forward(model, prompts[: args.batch], args.batch, args.device)  # warm up kernels
        capture(model, prompts[: args.batch], args.batch, args.device, "eagle3", folder)
        best = {"forward": float("inf")}
        sizes = {}
        for _ in range(args.rounds):
            best["forward"] = min(best["forward"], plain_forward(model, prompts, args.batch, args.device))
            for v in args.variants.split(","):
                seconds, sizes[v] = capture(model, prompts, args.batch, args.device, v, folder)
                best[v] = min(best.get(v, float("inf")), seconds)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    name = torch.cuda.get_device_name() if args.device.startswith("cuda") else "CPU"
    print(f"{name}; Llama-shaped, hidden {args.hidden}, {args.layers} layers, bf16; {args.batches} batches of "
          f"{args.batch}x{args.seq} tokens; dump in {args.dir or tempfile.gettempdir()}; best of {args.rounds}")
    print(f"{'variant':22s} {'tok/s':>10s} {'time / forward':>15s} {'dump GB':>8s}")
    for v, seconds in best.items():
        label = "plain forward" if v == "forward" else f"capture_hf layers={v}"
        gb = f"{sizes[v] / 1e9:8.2f}" if v in sizes else " " * 8
        print(f"{label:22s} {tokens / seconds:10.0f} {seconds / best['forward']:14.2f}x {gb}")


if __name__ == "__main__":
    main()
