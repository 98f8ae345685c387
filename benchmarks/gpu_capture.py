"""Capture overhead on a GPU: plain forward vs naive ``.cpu()`` capture vs StateOffloader, same run.

A random-init model of realistic width (hidden 7168, a few layers, bf16) runs batches of
``--batch x --seq`` tokens. Every variant runs the same batches; throughputs are printed as
ratios to the plain forward measured in this run:

  forward        model(input_ids) -- the baseline
  states         forward_states(): output_hidden_states + the pre-norm hook, nothing copied
  naive_cpu      forward_states() then .cpu() on every state (what a first capture script does)
  offload        forward_states() then StateOffloader.submit() of the HF capture's four streams
                 (layers = all N+1 HF states, final_prenorm, eagle3_aux, final), sink drops them
  offload_unique forward_states() then StateOffloader.submit() of the distinct tensors only (the
                 N+1 HF states and the pre-norm final): the four streams hold HF[N] and the aux
                 indices twice, so this copies 29% fewer bytes (8 layers); streams are views/concats
                 a host-side writer can assemble
  offload_drafter  only the drafter streams (eagle3_aux, final), sink drops them
  offload_ring   diagnosis: offload with pinned buffers allocated once and reused (no pinned cache)
  copy_serial    diagnosis: the offload's bytes copied into pinned memory in the loop, not overlapped
  offload_write  the same as offload, sink = DumpWriter(background=True) writing to --out (disk bound)
  offload_write_drafter  only the drafter streams (eagle3_aux, final) to the DumpWriter

    python benchmarks/gpu_capture.py --arch llama --layers 4 --batch 4 --seq 2048
    python benchmarks/gpu_capture.py --arch deepseek_v3 --layers 4 --batch 4 --seq 2048
    python benchmarks/gpu_capture.py --device cpu --hidden 64 --layers 2 --seq 64   # smoke test
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
try:
    from alignprobe.probes.hf_states import forward_states
    from alignprobe.probes.offload import StateOffloader
except ImportError:  # a copy of the repository that was not pip-installed (the GPU machine)
    from probes.hf_states import forward_states
    from probes.offload import StateOffloader
from alignprobe.conventions import eagle3_hf_indices
from alignprobe.dump import DumpWriter, Provenance, StreamClaim
from alignprobe.dump.schema import FINAL_NORM_PRE, ROLE_DRAFTER_INPUT, ROLE_FINAL, ROLE_LAYERS


def build_model(arch: str, layers: int, hidden: int, vocab: int, experts: int, device: str):
    from transformers import AutoModelForCausalLM, DeepseekV3Config, LlamaConfig

    if arch == "llama":
        config = LlamaConfig(
            vocab_size=vocab,
            hidden_size=hidden,
            intermediate_size=hidden * 18432 // 7168,
            num_hidden_layers=layers,
            num_attention_heads=max(1, hidden // 128),
            num_key_value_heads=max(1, hidden // 128 // 7),
            max_position_embeddings=8192,
        )
    else:
        # The DeepSeek-V3 / Kimi-K2 shape (MLA, 256 routed experts, 8 active), the first layer dense.
        small = hidden < 1024  # smoke test on CPU
        config = DeepseekV3Config(
            vocab_size=vocab,
            hidden_size=hidden,
            num_hidden_layers=layers,
            first_k_dense_replace=1,
            n_routed_experts=experts,
            max_position_embeddings=8192,
            **(
                dict(intermediate_size=hidden * 2, moe_intermediate_size=hidden // 2, num_attention_heads=4,
                     num_key_value_heads=4, q_lora_rank=24, kv_lora_rank=16, qk_rope_head_dim=8,
                     qk_nope_head_dim=8, v_head_dim=16, n_group=2, topk_group=1, num_experts_per_tok=2)
                if small else {}
            ),
        )
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    return model.eval(), config


def capture_streams(states, layers: int, drafter_only: bool) -> dict[str, torch.Tensor]:
    """The HF capture's streams (see contract): concatenated on the device, one tensor each."""
    aux = eagle3_hf_indices(layers)
    out = {
        "eagle3_aux": torch.cat([states.hf[i] for i in aux], dim=-1),
        "final": states.hf[layers],
    }
    if not drafter_only:
        out["layers"] = torch.cat(states.hf, dim=-1)
        out["final_prenorm"] = states.final_prenorm
    return out


def claims(layers: int, hidden: int, drafter_only: bool) -> dict[str, StreamClaim]:
    c = {
        "eagle3_aux": StreamClaim(eagle3_hf_indices(layers), hidden, layers, role=ROLE_DRAFTER_INPUT),
        "final": StreamClaim((layers,), hidden, layers, role=ROLE_FINAL),
    }
    if not drafter_only:
        c["layers"] = StreamClaim(tuple(range(layers + 1)), hidden, layers, role=ROLE_LAYERS)
        c["final_prenorm"] = StreamClaim((layers,), hidden, layers, final_norm=FINAL_NORM_PRE, role=ROLE_LAYERS)
    return c


class RingOffloader(StateOffloader):
    """Diagnosis only: pinned buffers allocated once and reused in turn, bypassing torch's pinned
    cache. Valid here because the sink drops each batch before the ring comes round again."""

    def __init__(self, sink, *, max_in_flight: int = 2):
        super().__init__(sink, max_in_flight=max_in_flight)
        self._ring: dict[str, list[torch.Tensor]] = {}
        self._turn: dict[str, int] = {}

    def _host_buffer(self, name, t):
        slots = self._ring.setdefault(name, [])
        if len(slots) < 4:  # in the sink + max_in_flight queued + the one being filled
            slots.append(torch.empty(t.shape, dtype=t.dtype, pin_memory=True))
            return slots[-1]
        self._turn[name] = (self._turn.get(name, -1) + 1) % len(slots)
        return slots[self._turn[name]]


class WriterSink:
    """Split a batch's host states into samples and add them to a DumpWriter (on the offload thread)."""

    def __init__(self, writer: DumpWriter):
        self.writer = writer

    def __call__(self, key, states: dict[str, torch.Tensor]) -> None:
        sample_ids, token_ids = key
        for row, sid in enumerate(sample_ids):
            self.writer.add(sid, token_ids[row], {name: s[row] for name, s in states.items()})


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def run_variant(name, model, batches, layers, device, out_dir, steps_warm):
    """Seconds and tokens of the timed batches (the first ``steps_warm`` batches are warm-up, not timed)."""
    writer = offloader = None
    drafter_only = name in ("offload_write_drafter", "offload_drafter")
    if name.startswith("offload"):
        sink = lambda key, states: None  # noqa: E731 - the copy is what is measured
        if name.startswith("offload_write"):
            path = os.path.join(out_dir, f"{name}.h5")
            hidden = model.config.hidden_size
            writer = DumpWriter(path, Provenance.here(engine="benchmark"), claims(layers, hidden, drafter_only),
                                overwrite=True, background=True)
            sink = WriterSink(writer)
        offloader = (RingOffloader if name == "offload_ring" else StateOffloader)(sink, max_in_flight=2)
    t0 = None
    serial_buffers: dict = {}
    with torch.inference_mode():
        for step, (ids_cpu, input_ids) in enumerate(batches):
            if step == steps_warm:
                if offloader is not None:
                    offloader.drain()
                sync(device)
                t0 = time.perf_counter()
            if name == "forward":
                model(input_ids=input_ids, use_cache=False)
            else:
                states = forward_states(model, input_ids)
                if name == "naive_cpu":
                    host = [h.cpu() for h in states.hf] + [states.final_prenorm.cpu()]
                    del host
                elif name == "copy_serial":  # the same bytes as offload, into pinned memory, not overlapped
                    for t in capture_streams(states, layers, False).values():
                        if t.shape not in serial_buffers:
                            serial_buffers[t.shape] = torch.empty(t.shape, dtype=t.dtype, pin_memory=t.is_cuda)
                        serial_buffers[t.shape].copy_(t)
                elif offloader is not None:
                    sample_ids = [f"b{step}-{r}" for r in range(input_ids.shape[0])]
                    if name == "offload_unique":
                        tensors = {f"hf{i}": h for i, h in enumerate(states.hf)} | {"prenorm": states.final_prenorm}
                    else:
                        tensors = capture_streams(states, layers, drafter_only)
                    offloader.submit((sample_ids, ids_cpu), tensors)
                del states
        if offloader is not None:
            offloader.drain()
        sync(device)
    seconds = time.perf_counter() - t0
    tokens = sum(ids.numel() for ids, _ in batches[steps_warm:])
    extra = {}
    if offloader is not None:
        offloader.close()
    if writer is not None:
        t1 = time.perf_counter()
        writer.finish()
        extra["finish_s"] = round(time.perf_counter() - t1, 2)
        extra["dump_gb"] = round(os.path.getsize(writer.path) / 1e9, 2)
        os.remove(writer.path)
    return seconds, tokens, extra


def copy_gbps(nbytes: int = 1 << 30, repeats: int = 5) -> dict[str, float]:
    """Device-to-host and host-to-device bandwidth with pinned host memory (best of ``repeats``)."""
    dev = torch.empty(nbytes, dtype=torch.uint8, device="cuda").random_()
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    out = {}
    for name, dst, src in (("d2h_pinned", host, dev), ("h2d_pinned", dev, host)):
        best = float("inf")
        for _ in range(repeats):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            dst.copy_(src, non_blocking=True)
            torch.cuda.synchronize()
            best = min(best, time.perf_counter() - t0)
        out[name] = nbytes / best / 1e9
    pageable = torch.empty(nbytes, dtype=torch.uint8)
    t0 = time.perf_counter()
    pageable.copy_(dev)
    out["d2h_pageable"] = nbytes / (time.perf_counter() - t0) / 1e9
    return out


def disk_write_gbps(out_dir: str, gigabytes: float = 2.0) -> float:
    """Raw sequential write speed of the dump folder (numpy tofile + fsync), for the disk-bound variants."""
    block = os.urandom(64 << 20)
    path = os.path.join(out_dir, "disk-probe.bin")
    n = int(gigabytes * 1e9) // len(block)
    t0 = time.perf_counter()
    with open(path, "wb") as fh:
        for _ in range(n):
            fh.write(block)
        fh.flush()
        os.fsync(fh.fileno())
    seconds = time.perf_counter() - t0
    os.remove(path)
    return n * len(block) / seconds / 1e9


def profile_variant(name, model, batches, layers, device, warmup) -> None:
    """torch.profiler over a few batches of one variant: where the CPU thread and the GPU spend time."""
    from torch.profiler import ProfilerActivity, profile

    few = batches[: warmup + 4]
    run_variant(name, model, few, layers, device, tempfile.gettempdir(), warmup)  # warm the caches
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        run_variant(name, model, few, layers, device, tempfile.gettempdir(), warmup)
    print(f"# profile of {name}, by self CPU time")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=14, max_name_column_width=40))
    print(f"# profile of {name}, by device time")
    print(prof.key_averages().table(sort_by="self_device_time_total", row_limit=10, max_name_column_width=40))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--arch", choices=["llama", "deepseek_v3"], default="llama")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=7168)
    p.add_argument("--experts", type=int, default=256)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--steps", type=int, default=10, help="timed batches per variant")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--write-steps", type=int, default=5,
                   help="timed batches of the offload_write variants (they fill the disk: 1.6 GB a batch at 8 layers)")
    p.add_argument("--rounds", type=int, default=2, help="each variant runs this many times, interleaved")
    p.add_argument("--variants", default="forward,states,naive_cpu,offload,offload_write_drafter,offload_write")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--out", default=None, help="folder for the written dumps (default: a temporary folder)")
    p.add_argument("--json", default=None, help="also write the figures here")
    p.add_argument("--profile", default=None, metavar="VARIANT", help="print a torch.profiler table of VARIANT first")
    args = p.parse_args()

    model, config = build_model(args.arch, args.layers, args.hidden, args.vocab, args.experts, args.device)
    params = sum(p.numel() for p in model.parameters())
    g = torch.Generator().manual_seed(1)
    batches = []
    for _ in range(args.warmup + args.steps):
        ids = torch.randint(0, args.vocab, (args.batch, args.seq), generator=g)
        batches.append((ids, ids.to(args.device)))
    out_dir = args.out or tempfile.mkdtemp(prefix="alignprobe-gpu-bench-")
    os.makedirs(out_dir, exist_ok=True)
    device_name = torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu"
    print(f"# {args.arch}: {args.layers} layers, hidden {config.hidden_size}, {params / 1e9:.2f}B params, bf16, "
          f"{args.batch}x{args.seq} tokens a batch, device {device_name}, torch {torch.__version__}", flush=True)
    experts_impl = getattr(config, "_experts_implementation", None)
    if experts_impl:
        print(f"# experts implementation: {experts_impl}")

    copies = copy_gbps() if args.device.startswith("cuda") else {}
    if copies:
        batch_bytes = args.batch * args.seq * config.hidden_size * 2
        print("# copy bandwidth GB/s: " + ", ".join(f"{k} {v:.1f}" for k, v in copies.items())
              + f"; one HF state of a batch is {batch_bytes / 1e6:.0f} MB")
    if args.profile:
        profile_variant(args.profile, model, batches, args.layers, args.device, args.warmup)
    variants = args.variants.split(",")
    results: dict[str, list[float]] = {v: [] for v in variants}  # tokens per second of each round
    extras: dict[str, dict] = {}
    for _ in range(args.rounds):
        for v in variants:
            writes = v.startswith("offload_write")
            use = batches[: args.warmup + args.write_steps] if writes else batches
            seconds, tokens, extra = run_variant(v, model, use, args.layers, args.device, out_dir, args.warmup)
            results[v].append(tokens / seconds)
            extras[v] = extra
            print(f"  {v:24s} {tokens / seconds:12,.0f} tok/s  {extra or ''}", flush=True)
    disk = disk_write_gbps(out_dir) if any(v.startswith("offload_write") for v in variants) else None
    if args.out is None:
        shutil.rmtree(out_dir, ignore_errors=True)

    base = max(results["forward"]) if "forward" in results else None
    summary = {"arch": args.arch, "layers": args.layers, "hidden": config.hidden_size, "params_b": round(params / 1e9, 2),
               "batch_tokens": args.batch * args.seq, "device": device_name, "torch": torch.__version__,
               "disk_write_gbps": disk and round(disk, 2), "copy_gbps": copies, "variants": {}}
    print(f"\n{'variant':24s} {'tok/s (best)':>14s} {'time / forward':>15s} {'overhead':>9s}")
    for v in variants:
        best = max(results[v])
        row = {"tokens_per_s": round(best), "rounds_tokens_per_s": [round(r) for r in results[v]], **extras.get(v, {})}
        if base:
            row["time_ratio"] = round(base / best, 3)
            print(f"{v:24s} {best:14,.0f} {base / best:14.3f}x {100 * (base / best - 1):8.1f}%")
        summary["variants"][v] = row
    if disk is not None:
        print(f"disk sequential write: {disk:.2f} GB/s")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(summary, fh, indent=1)


if __name__ == "__main__":
    main()
