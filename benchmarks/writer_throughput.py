"""The capture writer alone, on the CPU: how fast `PlannedDumpWriter` puts a batch of states into a file.

`capture_hf`'s sink receives each batch as host tensors ``[batch, columns, width]`` (pinned buffers on
a GPU) and writes every sample's rows ``[row, first:stop]`` to the dump. This times, in one run and
into the same folder (default /dev/shm: memory, so the file system's copy is the only other cost):

    raw        one os.pwrite per stream per batch of a contiguous buffer of the same bytes: what the
               file system takes at best, no dump bookkeeping
    per-sample PlannedDumpWriter.add once per sample: the writes capture_hf made before add_batch,
               one per stream per sample
    batch      PlannedDumpWriter.add_batch once per batch: one os.pwritev per stream of a batch

``--no-io``: every pwrite/pwritev returns at once, as if written: what is left is the writer's own
work per batch (checks, views, the iovec lists, the thread pool), the part that is not the file
system's copy.

Host tensors are allocated and touched once and reused for every batch, as torch's pinned cache
reuses its buffers. Streams are capture_hf's for ``--layers`` (eagle3 or all) of a model of
``--num-layers`` layers. Sample lengths vary in [seq/2, seq] with right padding, as in a real batch.

    python benchmarks/writer_throughput.py                        # hidden 7168, 8 layers, eagle3 and all
    python benchmarks/writer_throughput.py --shapes 4x2048,64x128 --hidden 4096 --batches 4
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

import numpy as np
import torch

from alignprobe.dump import Provenance
from alignprobe.dump import planned_writer
from alignprobe.dump.planned_writer import PlannedDumpWriter
from alignprobe.probes.hf import ModelShape, resolve_layers, stream_claims

PATHS = ("raw", "per-sample", "batch")


def batch_tensors(claims, batch: int, seq: int, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {name: torch.randn(batch, seq, c.width, generator=g).to(torch.bfloat16) for name, c in claims.items()}


def write_dump(path: str, how: str, claims, tensors, lengths: list[list[int]]) -> float:
    """Seconds to write every batch (the writes and the final flush; not the file's creation)."""
    plan = [(f"s{b}-{i}", n) for b, batch in enumerate(lengths) for i, n in enumerate(batch)]
    with PlannedDumpWriter(path, Provenance(), claims, plan, flush_tokens=1 << 62) as writer:
        if how == "raw":
            fd = os.open(path + ".partial/dump.h5", os.O_RDWR)
            # One contiguous buffer per stream, cut to the size of each batch's stored rows.
            raw = {n: memoryview(t.view(torch.int16).numpy()).cast("B") for n, t in tensors.items()}
        start = time.perf_counter()
        at = 0
        for b, batch in enumerate(lengths):
            ids = [f"s{b}-{i}" for i in range(len(batch))]
            tokens = [np.arange(n, dtype=np.int64) for n in batch]
            if how == "raw":
                os.pwrite(fd, np.concatenate(tokens), writer._places["tokens"][0] + at * 8)
                for name, c in claims.items():
                    os.pwrite(fd, raw[name][: sum(batch) * c.width * 2], writer._places[name][0] + at * c.width * 2)
                at += sum(batch)
            elif how == "per-sample":
                for row, (sid, n) in enumerate(zip(ids, batch)):
                    writer.add(sid, tokens[row], {name: t[row, :n] for name, t in tensors.items()})
            else:
                writer.add_batch(ids, tokens, tensors, [(0, n) for n in batch])
        if how == "raw":
            os.fsync(fd)
            os.close(fd)
            writer.done_ids.update(sid for sid, _ in plan)  # so that finish() accepts the dump
        writer.flush()
        return time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hidden", type=int, default=7168)
    p.add_argument("--num-layers", type=int, default=8, help="N: the model whose capture_hf streams are written")
    p.add_argument("--layers", default="eagle3,all", help="capture_hf --layers settings to time, comma-separated")
    p.add_argument("--shapes", default="4x2048,64x128", help="batch x seq, comma-separated")
    p.add_argument("--batches", type=int, default=4)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--paths", default=",".join(PATHS))
    p.add_argument("--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None)
    p.add_argument("--no-io", action="store_true", help="pwrite/pwritev write nothing: the writer's own cost")
    p.add_argument("--threads", type=int, default=planned_writer.WRITE_THREADS, help="the writer's write threads")
    args = p.parse_args()
    planned_writer.WRITE_THREADS = args.threads
    if args.no_io:
        os.pwrite = lambda fd, data, offset: memoryview(data).nbytes
        os.pwritev = lambda fd, buffers, offset: sum(memoryview(b).nbytes for b in buffers)
    paths = args.paths.split(",")
    shape = ModelShape(args.num_layers, args.hidden, 32000, None)
    aux = resolve_layers("eagle3", args.num_layers)
    into = "nothing (--no-io)" if args.no_io else args.dir or tempfile.gettempdir()
    print(f"PlannedDumpWriter into {into}; hidden {args.hidden}, N={args.num_layers}, bf16; "
          f"{args.batches} batches a dump; best of {args.rounds}; {args.threads} write threads; {os.cpu_count()} CPUs")
    print(f"{'layers':7s} {'batch':>9s} {'path':>10s} {'GB':>6s} {'s':>7s} {'ms/batch':>9s} {'GB/s':>6s} {'vs raw':>7s} "
          f"{'vs per-sample':>14s}")
    folder = tempfile.mkdtemp(dir=args.dir)
    try:
        for layers in args.layers.split(","):
            claims = stream_claims(shape, resolve_layers(layers, args.num_layers), aux, "bfloat16")
            for spec in args.shapes.split(","):
                batch, seq = (int(x) for x in spec.split("x"))
                tensors = batch_tensors(claims, batch, seq)
                g = np.random.default_rng(1)
                lengths = [g.integers(seq // 2, seq + 1, batch).tolist() for _ in range(args.batches)]
                gb = sum(map(sum, lengths)) * (sum(c.width for c in claims.values()) * 2 + 8) / 1e9
                best = {}
                for _ in range(args.rounds):
                    for how in paths:
                        out = os.path.join(folder, f"{how}.h5")
                        best[how] = min(best.get(how, float("inf")), write_dump(out, how, claims, tensors, lengths))
                        os.remove(out)
                for how in paths:
                    s = best[how]
                    vs_raw = f"{best['raw'] / s:6.2f}x" if "raw" in best else ""
                    vs_old = f"{best['per-sample'] / s:13.2f}x" if "per-sample" in best else ""
                    print(f"{layers:7s} {spec:>9s} {how:>10s} {gb:6.2f} {s:7.3f} {1e3 * s / args.batches:9.2f} "
                          f"{gb / s:6.1f} {vs_raw:>7s} {vs_old:>14s}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
