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
"""

from __future__ import annotations

import os
import re
import sys

from alignprobe.compare.kernels import Kernels, kernels_for
from alignprobe.errors import BadInput

CPU_KEEPS_UP_CORES = 16  # where the CPU path was measured to beat the GPU path at every size

_TORCH_DEVICE = re.compile(r"cuda(:\d+)?")


def chosen_kernels(device: "str | Kernels | None", cores: int | None = None) -> tuple[Kernels, str | None]:
    """(the kernels to run on, a note saying why they are not the device asked for, or None)."""
    if not isinstance(device, str) or device == "cpu":
        return kernels_for(device), None
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
    return kernels_for("cpu"), note
