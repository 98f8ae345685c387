"""The comparer's two kernels on the CPU (the code compare runs) and on a GPU (torch), same data.

The comparer has no ``--device`` option yet, so this measures what one would buy:

  slice metrics   per-row ||a||^2, ||b||^2, ||a-b||^2, cosine and the sums compare keeps, for one
                  (train slice, serve slice) pair of bf16 rows [R, H]:
                  cpu = alignprobe.compare.metrics.SliceAccumulator.update after the dump's
                  bf16 widening; gpu = pinned host -> device copy of the bf16 bits, then the same
                  sums in float32 products / float64 totals
  mapping search  the per-row cosine of k = 3 serve slices against 62 train slices, averaged over
                  R sampled rows (62 x 3 dot products of H per row): cpu = numpy as in
                  compare.mapping (unit rows, one GEMV per candidate); gpu = one batched matmul

Throughput counts the bf16 bytes that go in. Run on the GPU machine:

    python benchmarks/gpu_compare.py --rows 8192
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from alignprobe.compare.metrics import SliceAccumulator  # noqa: E402
from alignprobe.dump.encoding import from_storage  # noqa: E402

H = 7168


def bf16_bits(rows: int, width: int, seed: int) -> np.ndarray:
    x = torch.randn(rows, width, generator=torch.Generator().manual_seed(seed))
    return x.bfloat16().view(torch.int16).numpy().view(np.uint16)


def best_of(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def slice_metrics_cpu(a_bits, b_bits) -> None:
    acc = SliceAccumulator(max_position=len(a_bits))
    step = max(1, (8 << 20) // (4 * H))  # compare's block of about 8 MB
    positions = np.arange(len(a_bits))
    for s in range(0, len(a_bits), step):
        acc.update(from_storage(a_bits[s : s + step], "bfloat16-bits"), from_storage(b_bits[s : s + step], "bfloat16-bits"),
                   positions[s : s + step])


def slice_metrics_gpu(a_host, b_host) -> torch.Tensor:
    a = a_host.to("cuda", non_blocking=True).view(torch.bfloat16).float()
    b = b_host.to("cuda", non_blocking=True).view(torch.bfloat16).float()
    aa = (a * a).sum(1, dtype=torch.float64)
    bb = (b * b).sum(1, dtype=torch.float64)
    d = a - b
    dd = (d * d).sum(1, dtype=torch.float64)
    na, nb = aa.sqrt(), bb.sqrt()
    cos = 1 - (dd - (na - nb) ** 2) / (2 * na * nb)
    out = torch.stack([aa.sum(), bb.sum(), dd.sum(), cos.sum(), cos.min(), d.abs().max().double()])
    return out.cpu()


def mapping_cpu(serve_bits, train_bits, k: int, n: int) -> np.ndarray:
    def units(bits):
        x = from_storage(bits, "bfloat16-bits")
        sq = np.einsum("ij,ij->i", x, x, dtype=np.float64)
        return x * (1 / np.sqrt(sq)).astype(np.float32)[:, None]

    cos = np.zeros((k, n))
    group = 256
    for s in range(0, len(serve_bits), group):
        su = np.stack([units(serve_bits[s : s + group, j * H : (j + 1) * H]) for j in range(k)]).reshape(k, -1)
        for c in range(n):
            cos[:, c] += su @ units(train_bits[s : s + group, c * H : (c + 1) * H]).ravel()
    return cos / len(serve_bits)


def mapping_gpu(serve_host, train_host, k: int, n: int) -> torch.Tensor:
    s = serve_host.to("cuda", non_blocking=True).view(torch.bfloat16).float().view(-1, k, H)
    t = train_host.to("cuda", non_blocking=True).view(torch.bfloat16).float().view(-1, n, H)
    s = s / s.norm(dim=-1, keepdim=True)
    t = t / t.norm(dim=-1, keepdim=True)
    cos = torch.einsum("rkh,rnh->kn", s, t) / s.shape[0]
    return cos.double().cpu()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=8192, help="rows for the slice metrics")
    p.add_argument("--mapping-rows", type=int, default=2048, help="sampled rows for the mapping search")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    cuda = torch.cuda.is_available()
    print(f"# torch {torch.__version__}, {torch.get_num_threads()} CPU threads, "
          f"GPU {torch.cuda.get_device_name() if cuda else 'none'}")

    a, b = bf16_bits(args.rows, H, 1), bf16_bits(args.rows, H, 2)
    nbytes = a.nbytes + b.nbytes
    t_cpu = best_of(lambda: slice_metrics_cpu(a, b), args.repeats)
    print(f"slice metrics   cpu {t_cpu * 1e3:8.1f} ms  {nbytes / t_cpu / 1e9:7.2f} GB/s")
    if cuda:
        a_h = torch.from_numpy(a.view(np.int16)).pin_memory()
        b_h = torch.from_numpy(b.view(np.int16)).pin_memory()
        got = slice_metrics_gpu(a_h, b_h)
        acc = SliceAccumulator(args.rows)
        acc.update(from_storage(a, "bfloat16-bits"), from_storage(b, "bfloat16-bits"), np.arange(args.rows))
        print(f"  gpu vs cpu: sum_dd rel diff {abs(float(got[2]) / acc.sum_dd - 1):.1e}, "
              f"cosine mean diff {abs(float(got[3]) / args.rows - acc.cosine_mean):.1e}")
        t_gpu = best_of(lambda: slice_metrics_gpu(a_h, b_h), args.repeats)
        print(f"slice metrics   gpu {t_gpu * 1e3:8.1f} ms  {nbytes / t_gpu / 1e9:7.2f} GB/s  ({t_cpu / t_gpu:.1f}x the cpu)")

    k, n, rows = 3, 62, args.mapping_rows
    s_bits, t_bits = bf16_bits(rows, k * H, 3), bf16_bits(rows, n * H, 4)
    nbytes = s_bits.nbytes + t_bits.nbytes
    t_cpu = best_of(lambda: mapping_cpu(s_bits, t_bits, k, n), max(1, args.repeats - 2))
    print(f"mapping {k}x{n}     cpu {t_cpu * 1e3:8.1f} ms  {nbytes / t_cpu / 1e9:7.2f} GB/s  ({rows} rows)")
    if cuda:
        s_h = torch.from_numpy(s_bits.view(np.int16)).pin_memory()
        t_h = torch.from_numpy(t_bits.view(np.int16)).pin_memory()
        diff = np.abs(mapping_gpu(s_h, t_h, k, n).numpy() - mapping_cpu(s_bits, t_bits, k, n)).max()
        t_gpu = best_of(lambda: mapping_gpu(s_h, t_h, k, n), args.repeats)
        print(f"mapping {k}x{n}     gpu {t_gpu * 1e3:8.1f} ms  {nbytes / t_gpu / 1e9:7.2f} GB/s  "
              f"({t_cpu / t_gpu:.1f}x the cpu; max |cos gpu - cpu| {diff:.1e})")


if __name__ == "__main__":
    main()
