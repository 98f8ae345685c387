"""End to end: `capture_hf` (forward + offload + PlannedDumpWriter) against a plain forward of the
same model and batches, in the same run. Prints, for every variant: seconds, tokens/s, time / forward,
the bytes written and the rate they were written at.

    python benchmarks/gpu_capture_hf.py --hidden 7168 --layers 8,32 --batch 4 --seq 2048   # on the GPU
    python benchmarks/gpu_capture_hf.py --hidden 256 --layers 8 --batch 2 --seq 128 --device cpu

A DeepSeek-V3-shaped model (MLA + MoE at hidden 7168, random weights) too big for the GPU share it is
given runs under an accelerate device map, the layers past ``--gpu-memory`` offloaded to host memory
and brought to the GPU as they run; the plain forward runs the same placement. Peak GPU memory
(allocated) and peak host memory (RSS, sampled) are printed for each variant:

    python benchmarks/gpu_capture_hf.py --arch deepseek --layers 16 --experts 32 --gpu-memory 24 --batch 2 --batches 3
    python benchmarks/gpu_capture_hf.py --checks     # small model: device map vs one device, FP8 block

``--checks`` saves a small DeepseekV3 folder and captures it through ``load_hf_model`` on one GPU and
with a device map that offloads half its layers, and compares the dumps bit for bit; then it
saves the folder as an FP8 block-quantized checkpoint (transformers' FineGrainedFP8, 128x128 blocks,
the DeepSeek-V3 checkpoint's own format) and captures that.

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
import threading
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


def build_deepseek(hidden: int, layers: int, experts: int, vocab: int, heads: int = 128):
    """DeepSeek-V3's shape (MLA ranks, head dims, one dense layer first) with ``experts`` routed experts,
    random bf16 weights in host memory. Built empty and filled from the GPU's generator: initializing
    tens of GB on the CPU takes minutes."""
    from transformers import DeepseekV3Config, DeepseekV3ForCausalLM

    config = DeepseekV3Config(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=hidden * 18432 // 7168,
        moe_intermediate_size=hidden * 2048 // 7168, num_hidden_layers=layers, num_attention_heads=heads,
        num_key_value_heads=heads, n_routed_experts=experts, num_experts_per_tok=8, n_shared_experts=1,
        first_k_dense_replace=1, n_group=8, topk_group=4, kv_lora_rank=512, q_lora_rank=1536,
        qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128, max_position_embeddings=8192,
    )
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device("meta"):
            model = DeepseekV3ForCausalLM(config)
    finally:
        torch.set_default_dtype(default)
    model.to_empty(device="cpu")
    where = "cuda" if torch.cuda.is_available() else "cpu"
    g = torch.Generator(device=where).manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.fill_(1.0)
            else:
                p.copy_((torch.randn(p.shape, generator=g, device=where, dtype=torch.float32) * 0.02).to(p.dtype))
        for b in model.buffers():
            b.zero_()
        model.model.rotary_emb = type(model.model.rotary_emb)(config=config)  # its inv_freq, emptied above
    return model.eval()


def dispatch(model, gpu_gib: float):
    """Place ``model`` as ``from_pretrained(device_map="sequential", max_memory=...)`` would: GPU 0 up to
    ``gpu_gib``, the rest in host memory, run on GPU 0 (accelerate's offload hooks)."""
    from accelerate import dispatch_model, infer_auto_device_map

    device_map = infer_auto_device_map(model, max_memory={0: f"{gpu_gib}GiB", "cpu": "200GiB"},
                                       no_split_module_classes=model._no_split_modules, dtype=torch.bfloat16)
    model = dispatch_model(model, device_map, main_device=0)
    placed = {}
    for where in device_map.values():
        placed[str(where)] = placed.get(str(where), 0) + 1
    return model, placed


class HostPeak:
    """Peak resident memory of this process while the block runs, sampled every 20 ms from /proc."""

    def __enter__(self):
        self.peak, self._stop = rss(), threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, rss())

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss())


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


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
    if args.arch == "deepseek":
        model = build_deepseek(args.hidden, num_layers, args.experts, args.vocab)
        if args.gpu_memory:
            model, placed = dispatch(model, args.gpu_memory)
            print(f"# {num_layers} layers: device map {placed} (modules per device)")
        else:
            model = model.to(args.device)
    else:
        model = build_model(args.hidden, num_layers, args.vocab, args.device)
    plain_forward(model, prompts[: args.batch], args.batch, args.device)  # warm up kernels
    if variants:
        capture(model, prompts[: args.batch], args.batch, args.device, variants[0], folder)
    best: dict[str, tuple[float, int | None]] = {"forward": (float("inf"), None)}
    for _ in range(args.rounds):
        with measured(args.device, best, "forward"):
            seconds = plain_forward(model, prompts, args.batch, args.device)
        best["forward"] = (min(best["forward"][0], seconds), None)
        for v in variants:
            with measured(args.device, best, v):
                seconds, size = capture(model, prompts, args.batch, args.device, v, folder)
            if seconds < best.get(v, (float("inf"), None))[0]:
                best[v] = (seconds, size)
    del model
    if args.device.startswith("cuda"):
        torch.cuda.empty_cache()
    return best


PEAKS: dict[str, tuple[int, int]] = {}  # variant -> (peak GPU bytes allocated, peak host RSS bytes)


class measured:
    def __init__(self, device, best, key):
        self.device, self.key = device, key

    def __enter__(self):
        if self.device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
        self.host = HostPeak().__enter__()

    def __exit__(self, *exc):
        self.host.__exit__(*exc)
        gpu = torch.cuda.max_memory_allocated() if self.device.startswith("cuda") else 0
        old = PEAKS.get(self.key, (0, 0))
        PEAKS[self.key] = (max(old[0], gpu), max(old[1], self.host.peak))


def checks(args) -> None:
    """Device map vs one device through load_hf_model (bit for bit), then an FP8 block checkpoint."""
    import numpy as np
    from transformers import FineGrainedFP8Config

    from alignprobe.dump import open_dump
    from alignprobe.probes.hf import load_hf_model

    folder = tempfile.mkdtemp(dir=args.dir)
    try:
        small = build_deepseek(1792, 8, 16, args.vocab, heads=16)  # a quarter of V3's width: FP8 blocks divide it
        src = os.path.join(folder, "model")
        small.save_pretrained(src)
        del small
        g = torch.Generator().manual_seed(2)
        prompts = [Prompt(f"p{i}", torch.randint(0, args.vocab, (int(n),), generator=g).tolist())
                   for i, n in enumerate(torch.randint(50, 400, (12,), generator=g))]
        one, _ = load_hf_model(src, dtype="bf16", device="cuda", quiet=True)
        a = os.path.join(folder, "one.h5")
        capture_hf(one, prompts, a, layers="all", batch_size=4, progress=False)
        del one
        mapped, _ = load_hf_model(src, dtype="bf16", device_map="sequential", max_memory={0: "0.4GiB", "cpu": "20GiB"},
                                  quiet=True)
        placed = {}
        for where in mapped.hf_device_map.values():
            placed[str(where)] = placed.get(str(where), 0) + 1
        b = os.path.join(folder, "mapped.h5")
        capture_hf(mapped, prompts, b, layers="all", batch_size=4, progress=False)
        del mapped
        with open_dump(a) as da, open_dump(b) as db:
            same = all(np.array_equal(da.states(p.sample_id, s), db.states(p.sample_id, s))
                       for p in prompts for s in da.streams)
            print(f"check device map: one GPU vs device map {placed} (modules per device), "
                  f"{len(prompts)} prompts, streams {sorted(da.streams)}: bit-identical={same}; "
                  f"provenance device_map={db.provenance.capture.get('device_map')}")
        try:
            from transformers import AutoModelForCausalLM

            q = AutoModelForCausalLM.from_pretrained(src, dtype=torch.bfloat16, device_map="cuda",
                                                     quantization_config=FineGrainedFP8Config(weight_block_size=(128, 128)))
            fp8_dir = os.path.join(folder, "fp8")
            q.save_pretrained(fp8_dir)
            del q
            fp8, _ = load_hf_model(fp8_dir, dtype="bf16", device="cuda", quiet=True)
            c = os.path.join(folder, "fp8.h5")
            capture_hf(fp8, prompts, c, layers="eagle3", batch_size=4, progress=False)
            with open_dump(a) as da, open_dump(c) as dc:
                rel = max(float(np.abs(dc.states(p.sample_id, "final").astype(np.float32)
                                       - da.states(p.sample_id, "final").astype(np.float32)).max()
                                / np.abs(da.states(p.sample_id, "final").astype(np.float32)).max()) for p in prompts)
                print(f"check fp8 block checkpoint: loaded and captured, quantization={dc.provenance.quantization!r}, "
                      f"final state vs bf16: largest |diff| / largest |value| = {rel:.3g}")
        except Exception as exc:  # the check reports what transformers does with the format
            print(f"check fp8 block checkpoint: FAILED {type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


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
    p.add_argument("--arch", default="llama", choices=["llama", "deepseek"])
    p.add_argument("--experts", type=int, default=32, help="deepseek: routed experts a layer (DeepSeek-V3: 256)")
    p.add_argument("--gpu-memory", type=float, default=None,
                   help="deepseek: GiB of GPU 0 the device map may fill; the rest is offloaded to host memory")
    p.add_argument("--checks", action="store_true", help="run the small-model checks instead")
    args = p.parse_args()
    if args.checks:
        checks(args)
        return

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
    shape = ("Llama-shaped" if args.arch == "llama" else
             f"DeepseekV3-shaped ({args.experts} routed experts), device map GPU {args.gpu_memory} GiB + host")
    print(f"{name}; {shape}, hidden {args.hidden}, bf16; {args.batches} batches of {args.batch}x{args.seq} "
          f"= {tokens:,} tokens; dump in {args.dir or tempfile.gettempdir()}; best of {args.rounds}")
    print(f"{'layers':>6s}  {'variant':24s} {'seconds':>8s} {'tokens/s':>10s} {'vs forward':>10s} {'dump GB':>8s} {'GB/s':>6s}"
          f"  peak GPU GiB / host GiB")
    for num_layers, best in results.items():
        forward = best["forward"][0]
        for v, (seconds, size) in best.items():
            label = "plain forward" if v == "forward" else f"capture_hf layers={v}"
            written = f"{size / 1e9:8.3f} {size / 1e9 / seconds:6.2f}" if size else f"{'':8s} {'':6s}"
            gpu, host = PEAKS.get(v, (0, 0))
            print(f"{num_layers:6d}  {label:24s} {seconds:8.3f} {tokens / seconds:10,.0f} {seconds / forward:9.2f}x {written}"
                  f"  {gpu / 2**30:7.1f} / {host / 2**30:.1f}")


if __name__ == "__main__":
    main()
