"""The comparer's kernels on a torch device (``compare --device cuda``).

The stored bits go to the device as they are (bf16: half the bytes of float32 over PCIe) and are
widened there (uploaded by the measuring thread while the reading thread reads the next block).
Every per-row sum is taken in float64, which also makes the float32-overflow
fallback of the numpy kernels unnecessary. A block's pairs come back to the host in one copy (one
synchronisation per block, not one per pair), so blocks are large (``block_bytes``).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from alignprobe.compare.kernels import RowTerms
from alignprobe.dump.encoding import ENCODING_BF16_BITS
from alignprobe.errors import BadInput

BLOCK_BYTES = 64 << 20


class TorchKernels:
    block_bytes = BLOCK_BYTES

    def __init__(self, device: str):
        try:
            import torch
        except ImportError:
            raise BadInput(f"--device {device} needs torch: pip install torch") from None
        from alignprobe.devices import checked_device

        self.device = checked_device(device)
        self.name = str(self.device)
        self._torch = torch

    def load(self, raw: np.ndarray, encoding: str):
        torch = self._torch
        if encoding == ENCODING_BF16_BITS:
            bits = torch.from_numpy(np.ascontiguousarray(raw).view(np.int16)).to(self.device)
            return bits.view(torch.bfloat16).float()
        return torch.from_numpy(np.ascontiguousarray(raw)).to(self.device).float()

    def row_terms(self, pairs: Sequence[tuple]) -> list[RowTerms]:
        if not pairs:
            return []
        torch = self._torch
        fields = []
        for a, b in pairs:
            a, b = a.double(), b.double()
            d = a - b
            aa, bb = (a * a).sum(1), (b * b).sum(1)
            fields.append(
                torch.stack([aa, bb, (d * d).sum(1), d.abs().amax(1), *_flags(a, aa), *_flags(b, bb)])
            )
        host = torch.stack(fields).cpu().numpy()  # the block's only synchronisation
        out = []
        for f in host:
            flags = f[4:].astype(bool)
            out.append(RowTerms(f[0], f[1], f[2], f[3], *flags))
        return out

    def serve_units(self, block, k: int, hidden_size: int):
        parts = [_unit_rows(block[:, j * hidden_size : (j + 1) * hidden_size]) for j in range(k)]
        units, valid, sq = zip(*parts)
        torch = self._torch
        return torch.stack(units).reshape(k, -1), torch.stack(valid), torch.stack(sq)

    def train_units(self, train_slice):
        unit, valid, sq = _unit_rows(train_slice)
        return unit.reshape(-1), valid, sq

    def candidate_sums(self, serve, train) -> np.ndarray:
        (s_units, s_valid, s_sq), (u, v, t_sq) = serve, train
        return self._torch.stack([s_units @ u, s_valid @ v, s_sq @ v, s_valid @ t_sq]).cpu().numpy()

    def close(self) -> None:
        pass


def _flags(x, sq):
    """NaN rows, Inf rows (without NaN), constant rows (finite, not all zero), as float64 0/1."""
    nan = x.isnan().any(1)
    inf = ~nan & x.isinf().any(1)
    finite = ~(nan | inf)
    constant = finite & (sq > 0) & (x.amax(1) == x.amin(1))
    return nan.double(), inf.double(), constant.double()


def _unit_rows(x):
    """As numpy_kernels.unit_rows, in float64: unit rows (unusable ones zeroed), usable rows, ||x||^2."""
    x = x.double()
    sq = (x * x).sum(1)
    valid = sq.isfinite() & (sq > 0)
    safe = valid.unsqueeze(1)
    unit = x.where(safe, 0.0) / sq.where(valid, 1.0).sqrt().unsqueeze(1)
    return unit, valid.double(), sq.where(valid, 0.0)
