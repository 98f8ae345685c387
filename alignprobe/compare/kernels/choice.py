"""Which kernels a comparison runs on: ``--device cuda`` runs where it is fastest, and says so.

A comparison of two dumps reads every row once; the arithmetic per byte read is small. On a
many-core host the CPU kernels keep up with the reads, so the GPU cannot make the pass shorter,
and it adds its own start: importing torch (about 2 s and 500 MB of resident memory with a CUDA
build), the CUDA context, the uploads. On the H200 host (16 cores) ``--device cuda`` was slower
than the CPU at every size, from disk and from page cache (benchmarks/results/speed_h200.txt: 1 GB
cold 0.25x of the raw read against 0.85x, 8 GB cold 0.81x against 0.96x; cmpspeed_h200.txt, run 2:
1 GB cold 0.25x against 0.82x, warm 0.09x against 0.32x, the GPU path at 1.1 GB of peak RSS against
0.3). So a torch device asked
for by name runs on the CPU where there are CPU_KEEPS_UP_CORES cores or more, and the result says
which ran (``options["device"]``, ``options["device_asked"]`` and a note). A Kernels object given
as ``device`` is always used as it is (``TorchKernels("cuda")`` forces the GPU).

On the CPU, a pass of FUSED_MIN_VALUES values or more (both sides together) runs on the compiled
kernels (fused_kernels.py), a smaller one on numpy's. The compiled kernels are 1.5-1.8x faster on
a large pass from the page cache, but their start (numba's import and loading the compiled code
from its cache: about 1 s on the H200 host, of it 0.7 s in the first calls; 0.65 s on a 2-core box) and its resident memory (+60-100 MB)
are only repaid by a large pass (benchmarks/results/issue24_fused_h200.txt: 1 GB a dump they were
0.51-0.55x of the raw read cold and 0.22-0.25x warm against numpy's 0.56x and 0.24x; 8 GB a dump
0.96x cold and 0.86x warm against 0.92x and 0.49x). The threshold is where their measured per-byte
saving (0.24 s a GB of the pair, from the page cache) repays that start: 4 GB of bf16 states, 2 G values.
From disk the reads are the limit and the start is all they add: 3 GB a dump cold, 0.78-0.86x of the
raw read against numpy's 0.91-1.00x in four leases; numpy measuring a pass's first rows while they
start in a thread was slower still, warm and cold, its peak RSS 510 MB (issue24_final_h200.txt).
"""

from __future__ import annotations

import os
import re
import sys

from alignprobe.compare.kernels import Kernels, kernels_for
from alignprobe.errors import BadInput

CPU_KEEPS_UP_CORES = 16  # where the CPU path was measured to beat the GPU path at every size
FUSED_MIN_VALUES = 2 << 30  # a pass this large repays the compiled kernels' start (above)

_TORCH_DEVICE = re.compile(r"cuda(:\d+)?")


def chosen_kernels(device: "str | Kernels | None", cores: int | None = None,
                   pass_values: int = 0) -> tuple[Kernels, str | None]:
    """(the kernels to run on, a note saying why they are not the device asked for, or None) for a
    pass over ``pass_values`` stored values, both sides together."""
    if device is None or device == "cpu":
        return cpu_kernels(pass_values), None
    if not isinstance(device, str):
        return device, None
    cores = cores if cores is not None else os.cpu_count() or 1
    if cores < CPU_KEEPS_UP_CORES:
        return kernels_for(device), None
    name = device.strip()
    if "torch" in sys.modules:  # checked as fully as on the GPU: torch is loaded already
        from alignprobe.devices import checked_device

        checked_device(name)
    elif not _TORCH_DEVICE.fullmatch(name):
        raise BadInput(f"--device {device}: not a device name alignprobe computes on; use cpu, cuda or cuda:N")
    note = (f"--device {name}: measured on the CPU, which ran faster here ({cores} cores keep up with the reads; "
            "the GPU would add torch's and CUDA's start: compare/kernels/choice.py)")
    return cpu_kernels(pass_values), note


def cpu_kernels(pass_values: int) -> Kernels:
    """numpy's kernels, or the compiled ones for a pass large enough to repay their start."""
    if pass_values < FUSED_MIN_VALUES:
        return kernels_for("cpu")
    try:
        from alignprobe.compare.kernels.fused_kernels import FusedKernels
    except (ImportError, RuntimeError, OSError):  # no numba, or nowhere to cache its code (numba raises RuntimeError)
        return kernels_for("cpu")  # the same results, only slower
    return FusedKernels()
