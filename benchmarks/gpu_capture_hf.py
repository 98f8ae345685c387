"""End to end: `capture_hf` (forward + offload + PlannedDumpWriter) against a plain forward of the
same model and batches, in the same run. Prints, for every variant: seconds, tokens/s, time / forward,
the bytes written and the rate they were written at.

    python benchmarks/gpu_capture_hf.py --hidden 7168 --layers 8,32 --batch 4 --seq 2048   # on the GPU
    python benchmarks/gpu_capture_hf.py --hidden 256 --layers 8 --batch 2 --seq 128 --device cpu

``--layers`` takes one or more decoder layer counts: each is a model of its own, timed against its
own plain forward (more layers: more compute for the same bytes of the eagle3 view). A capture's
last batch is written after the last forward, with nothing left to overlap it: with few batches
that tail is a visible part of the time (``--batches``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

import torch

from alignprobe.probes.hf import ModelShape, capture_hf, resolve_layers, stream_claims
from alignprobe.probes.prompts import Prompt


def build_model(hidden: int, layers: int, vocab: int, device: str):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=hidden * 18 // 7, num_hidden_layers=layers,
        num_attention_heads=max(1, hidden // 128), num_key_value_heads=max(1, hidden // 1024),
        max_position_embeddings=8192,
    )
    torch.manual_seed(0)
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)  # built in bf16: 32 layers at hidden 7168 never exist in fp32 (68 GB)
    try:
        with torch.device(device):
            model = LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(default)
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


def capture(model, prompts, batch: int, device: str, layers: str, folder: str) -> tuple[float, int]:
    out = os.path.join(folder, "bench.h5")
    sync(device)
    start = time.perf_counter()
    capture_hf(model, prompts, out, layers=layers, batch_size=batch, progress=False, overwrite=True)
    seconds = time.perf_counter() - start
    size = os.path.getsize(out)
    os.remove(out)
    return seconds, size


def dump_bytes(num_layers: int, hidden: int, variant: str, tokens: int) -> int:
    """About what a capture of ``tokens`` tokens writes (bf16 states and int64 token ids)."""
    shape = ModelShape(num_layers, hidden, 0, None)
    streams = stream_claims(shape, resolve_layers(variant, num_layers), resolve_layers("eagle3", num_layers), "bfloat16")
    return tokens * (2 * sum(c.width for c in streams.values()) + 8)


def time_model(args, num_layers: int, prompts, folder: str) -> dict[str, tuple[float, int | None]]:
    """Best seconds (and dump bytes) of the plain forward and of each variant that fits in ``folder``."""
    tokens = len(prompts) * args.seq
    variants = []
    for v in args.variants.split(","):
        need, free = dump_bytes(num_layers, args.hidden, v, tokens), shutil.disk_usage(folder).free
        if need > 0.9 * free:
            print(f"# {num_layers} layers, {v}: skipped, the dump needs {need / 1e9:.1f} GB and {folder} has "
                  f"{free / 1e9:.1f} GB free (fewer --batches, or another --dir)")
        else:
            variants.append(v)
    model = build_model(args.hidden, num_layers, args.vocab, args.device)
    plain_forward(model, prompts[: args.batch], args.batch, args.device)  # warm up kernels
    if variants:
        capture(model, prompts[: args.batch], args.batch, args.device, variants[0], folder)
    best: dict[str, tuple[float, int | None]] = {"forward": (float("inf"), None)}
    for _ in range(args.rounds):
        best["forward"] = (min(best["forward"][0], plain_forward(model, prompts, args.batch, args.device)), None)
        for v in variants:
            seconds, size = capture(model, prompts, args.batch, args.device, v, folder)
            if seconds < best.get(v, (float("inf"), None))[0]:
                best[v] = (seconds, size)
    del model
    if args.device.startswith("cuda"):
        torch.cuda.empty_cache()
    return best


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hidden", type=int, default=7168)
    p.add_argument("--layers", default="8", help="decoder layer counts, comma-separated: one model each")
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--batches", type=int, default=8, help="batches per timed round")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None,
                   help="where the dump is written (default: /dev/shm, memory)")
    p.add_argument("--variants", default="eagle3,all", help="capture_hf --layers settings, comma-separated")
    args = p.parse_args()

    g = torch.Generator().manual_seed(1)
    prompts = [Prompt(f"p{i}", torch.randint(0, args.vocab, (args.seq,), generator=g).tolist())
               for i in range(args.batch * args.batches)]
    tokens = len(prompts) * args.seq
    folder = tempfile.mkdtemp(dir=args.dir)
    results = {}
    try:
        for num_layers in (int(n) for n in args.layers.split(",")):
            results[num_layers] = time_model(args, num_layers, prompts, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    name = torch.cuda.get_device_name() if args.device.startswith("cuda") else f"CPU ({os.cpu_count()} cores)"
    print(f"{name}; Llama-shaped, hidden {args.hidden}, bf16; {args.batches} batches of {args.batch}x{args.seq} "
          f"= {tokens:,} tokens; dump in {args.dir or tempfile.gettempdir()}; best of {args.rounds}")
    print(f"{'layers':>6s}  {'variant':24s} {'seconds':>8s} {'tokens/s':>10s} {'vs forward':>10s} {'dump GB':>8s} {'GB/s':>6s}")
    for num_layers, best in results.items():
        forward = best["forward"][0]
        for v, (seconds, size) in best.items():
            label = "plain forward" if v == "forward" else f"capture_hf layers={v}"
            written = f"{size / 1e9:8.3f} {size / 1e9 / seconds:6.2f}" if size else ""
            print(f"{num_layers:6d}  {label:24s} {seconds:8.3f} {tokens / seconds:10,.0f} {seconds / forward:9.2f}x {written}")


if __name__ == "__main__":
    main()
