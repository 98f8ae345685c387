"""The comparer's kernels (alignprobe/compare/kernels/) on the CPU (numpy) and on a GPU (torch), same data.

  slice metrics   load the stored bf16 bits of one (train slice, serve slice) pair [R, H], take the
                  per-row terms and feed a SliceAccumulator, in compare's blocks (8 MB of float32 on
                  the CPU, 64 MB on the GPU): NumpyKernels vs TorchKernels("cuda")
  mapping search  k = 3 serve slices against 62 candidate train slices on R sampled rows, in
                  compare's groups of 256 rows: serve_units / train_units / candidate_sums
  end to end      ``compare(train, serve, device=...)`` of a dump pair read from the page cache
                  (warm: what the arithmetic costs; compare_throughput.py measures it from the disk)

Throughput counts the stored bf16 bytes that go in. Run on the GPU machine:

    python benchmarks/gpu_compare.py --rows 65536 --e2e-gb 2
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from alignprobe.compare import compare  # noqa: E402
from alignprobe.compare.kernels import kernels_for  # noqa: E402
from alignprobe.compare.metrics import SliceAccumulator  # noqa: E402
from benchmarks._dumps import tokens_for, write_pair  # noqa: E402
from benchmarks._measure import warm_page_cache  # noqa: E402

H = 7168
BITS = "bfloat16-bits"


def bf16_bits(rows: int, width: int, seed: int) -> np.ndarray:
    x = torch.randn(rows, width, generator=torch.Generator().manual_seed(seed))
    return x.bfloat16().view(torch.int16).numpy().view(np.uint16)


def best_of(fn, repeats: int) -> tuple[float, object]:
    out = fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def slice_metrics(kernels, a_bits, b_bits) -> SliceAccumulator:
    acc = SliceAccumulator(max_position=len(a_bits))
    step = max(1, kernels.block_bytes // (4 * 2 * H))
    positions = np.arange(len(a_bits))
    for s in range(0, len(a_bits), step):
        a, b = kernels.load(a_bits[s : s + step], BITS), kernels.load(b_bits[s : s + step], BITS)
        (terms,) = kernels.row_terms([(a, b)])
        acc.add(terms, positions[s : s + step])
    return acc


def mapping(kernels, s_bits, t_bits, k: int, n: int) -> np.ndarray:
    sums = np.zeros((4, k, n))
    for s in range(0, len(s_bits), 256):
        serve = kernels.serve_units(kernels.load(s_bits[s : s + 256], BITS), k, H)
        for c in range(n):
            train = kernels.train_units(kernels.load(t_bits[s : s + 256, c * H : (c + 1) * H], BITS))
            sums[:, :, c] += kernels.candidate_sums(serve, train)
    return sums[0] / np.maximum(sums[1], 1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=16384, help="rows for the slice metrics")
    p.add_argument("--mapping-rows", type=int, default=2048, help="sampled rows for the mapping search")
    p.add_argument("--e2e-gb", type=float, default=1.0, help="GB per dump for the end-to-end compare (0: skip)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--device", default="cuda")
    args = p.parse_args()
    cpu, gpu = kernels_for("cpu"), kernels_for(args.device)
    print(f"# torch {torch.__version__}, {os.cpu_count()} CPU cores ({cpu.threads} metrics threads), "
          f"GPU {torch.cuda.get_device_name() if torch.cuda.is_available() else 'none'}")

    a, b = bf16_bits(args.rows, H, 1), bf16_bits(args.rows, H, 2)
    nbytes = a.nbytes + b.nbytes
    t_cpu, want = best_of(lambda: slice_metrics(cpu, a, b), args.repeats)
    t_gpu, got = best_of(lambda: slice_metrics(gpu, a, b), args.repeats)
    print(f"slice metrics  cpu {t_cpu * 1e3:8.1f} ms {nbytes / t_cpu / 1e9:7.2f} GB/s")
    print(f"slice metrics  {gpu.name:4s}{t_gpu * 1e3:8.1f} ms {nbytes / t_gpu / 1e9:7.2f} GB/s  "
          f"({t_cpu / t_gpu:.1f}x the cpu; rel-RMS rel diff {abs(got.rel_rms / want.rel_rms - 1):.1e}, "
          f"cosine mean diff {abs(got.cosine_mean - want.cosine_mean):.1e})")

    k, n, rows = 3, 62, args.mapping_rows
    s_bits, t_bits = bf16_bits(rows, k * H, 3), bf16_bits(rows, n * H, 4)
    nbytes = s_bits.nbytes + t_bits.nbytes
    t_cpu, want = best_of(lambda: mapping(cpu, s_bits, t_bits, k, n), max(1, args.repeats - 2))
    t_gpu, got = best_of(lambda: mapping(gpu, s_bits, t_bits, k, n), args.repeats)
    print(f"mapping {k}x{n}    cpu {t_cpu * 1e3:8.1f} ms {nbytes / t_cpu / 1e9:7.2f} GB/s  ({rows} rows)")
    print(f"mapping {k}x{n}    {gpu.name:4s}{t_gpu * 1e3:8.1f} ms {nbytes / t_gpu / 1e9:7.2f} GB/s  "
          f"({t_cpu / t_gpu:.1f}x the cpu; max |cos gpu - cpu| {np.abs(got - want).max():.1e})")

    if args.e2e_gb > 0:
        with tempfile.TemporaryDirectory(prefix="alignprobe-gpu-compare-", dir=os.environ.get("BENCH_DIR")) as folder:
            train, serve = os.path.join(folder, "train.h5"), os.path.join(folder, "serve.h5")
            write_pair(train, serve, tokens_for(args.e2e_gb))
            nbytes = os.path.getsize(train) + os.path.getsize(serve)
            for path in (train, serve):
                warm_page_cache(path)
            results = {}
            for device in ("cpu", args.device):
                seconds, results[device] = best_of(lambda device=device: compare(train, serve, tokenizer=None, device=device), 1)
                print(f"compare e2e    {device:4s}{seconds:8.2f} s  {nbytes / seconds / 1e9:7.2f} GB/s  (pair "
                      f"{nbytes / 1e9:.2f} GB, warm cache)  verdict {results[device].verdict}")
            diff = max(abs(x.rel_rms / y.rel_rms - 1) for s, t in zip(results["cpu"].streams, results[args.device].streams)
                       for x, y in zip(s.slices, t.slices))
            print(f"               rel-RMS of every slice: largest rel diff cpu vs {args.device} {diff:.1e}")
    cpu.close()


if __name__ == "__main__":
    main()
