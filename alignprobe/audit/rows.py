"""Per-row facts of a stream, computed in one pass over its states and shared by every check.

The sum of squares carries most of them: it is NaN exactly where a row holds a NaN, zero exactly
where a row is all zero, and equal to H * v^2 where a row is the constant v (the few candidates are
then checked value by value). Inf rows are confirmed the same way, so a finite row whose square
overflows float32 is not called infinite.
"""

from __future__ import annotations

import dataclasses
import threading

import numpy as np
import torch


@dataclasses.dataclass
class RowFacts:
    """``[rows, slices]`` arrays for one stream of one sample (rows as stored, padding included)."""

    norm2: np.ndarray  # float32 sum of squares
    nan: np.ndarray  # bool: the row holds a NaN
    inf: np.ndarray  # bool: the row holds an Inf and no NaN
    zero: np.ndarray  # bool: every value is exactly 0
    constant: np.ndarray  # bool: every value equal, not zero

    @property
    def finite(self) -> np.ndarray:
        return ~(self.nan | self.inf)


# Values widened to float32 at a time, into one scratch buffer that is reused: 512 KB stays in L2
# while it is summed. A fresh temporary per piece (``vector_norm(..., dtype=float32)`` on bf16) cost
# 2x in a Dask worker, whose MALLOC_TRIM_THRESHOLD_ makes every such allocation an mmap and its
# page faults (measured: 194 ms against 54 ms a 58 MB file; in this process 103 against 60 ms).
CHUNK_VALUES = 1 << 17
_scratch = threading.local()


def _buffer(values: int) -> torch.Tensor:
    buffer = getattr(_scratch, "buffer", None)
    if buffer is None or buffer.numel() < values:
        buffer = _scratch.buffer = torch.empty(values, dtype=torch.float32)
    return buffer


def row_facts(states: torch.Tensor) -> RowFacts:
    """Facts of ``states`` [rows, slices, H] in any float dtype (call with torch on one thread: see scan.py)."""
    rows, slices, hidden = states.shape
    norm2 = torch.empty(rows, slices, dtype=torch.float32)
    width = max(1, slices * hidden)
    step = max(1, CHUNK_VALUES // width)
    scratch = _buffer(step * width) if states.dtype != torch.float32 else None
    for start in range(0, rows, step):
        piece = states[start : start + step]
        if scratch is not None:
            piece = scratch[: piece.numel()].view(piece.shape).copy_(piece)
        torch.linalg.vector_norm(piece, dim=-1, out=norm2[start : start + step])
    first = states[..., 0].to(torch.float32).numpy()
    n2 = norm2.square_().numpy()
    nan = np.isnan(n2)
    inf = np.isinf(n2)
    if inf.any():
        where = np.argwhere(inf)
        inf[inf] = torch.isinf(states[where[:, 0], where[:, 1]]).any(-1).numpy()
    zero = n2 == 0
    with np.errstate(over="ignore", invalid="ignore"):
        candidates = (~zero) & np.isfinite(n2) & (np.abs(n2 - hidden * first * first) <= 1e-4 * n2)
    constant = np.zeros_like(zero)
    if candidates.any():
        where = np.argwhere(candidates)
        picked = states[where[:, 0], where[:, 1]]
        constant[candidates] = (picked == picked[:, :1]).all(-1).numpy()
    return RowFacts(n2, nan, inf, zero, constant)
