"""``--device``: the one check of a device name, for capture and compare alike.

torch knows more device types than alignprobe can run on here: ``mps`` parses on Linux and fails at
the first tensor, ``meta`` holds no values at all. Only ``cpu`` and an available ``cuda[:N]`` pass.
"""

from __future__ import annotations

from alignprobe.errors import BadInput, first_line

SUPPORTED = ("cpu", "cuda")


def checked_device(name: str):
    """``torch.device(name)`` when alignprobe can compute there, else one BadInput line."""
    import torch

    if not isinstance(name, str) or not name.strip():
        raise BadInput("--device is empty; use cpu, cuda or cuda:N")
    try:
        device = torch.device(name.strip())
    except (RuntimeError, ValueError, TypeError) as exc:
        raise BadInput(f"--device {name}: not a device name ({first_line(exc)}); use cpu, cuda or cuda:N") from None
    if device.type not in SUPPORTED:
        raise BadInput(f"--device {name}: alignprobe computes on cpu or cuda, not {device.type}; use cpu, cuda or cuda:N")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise BadInput(f"--device {name}: torch sees no CUDA device here; use --device cpu")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise BadInput(f"--device {name}: there are {torch.cuda.device_count()} CUDA devices (cuda:0..)")
    return device
