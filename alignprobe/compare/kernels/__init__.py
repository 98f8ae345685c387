"""The comparer's arithmetic over whole rows, on the CPU (numpy) or on a torch device.

Two kernels carry every operation that touches all H values of a row:

- ``row_terms``: for a (train slice, serve slice) pair, per row ||a||^2, ||b||^2, ||a-b||^2,
  max |a-b| and the NaN / Inf / constant flags of each side;
- the mapping search's cosine sums: every serve slice against one candidate train slice.

Everything after them (position buckets, percentiles, standard errors, findings) works on per-row
arrays in numpy, whatever the device, so both devices give the same result to float rounding.

``kernels_for("cpu")`` is numpy and never imports torch (compare of two dumps stays torch-free:
benchmarks/README.md); ``kernels_for("cuda")`` uploads the stored bits and widens them on the GPU.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol, Sequence

import numpy as np



@dataclasses.dataclass
class RowTerms:
    """Per-row terms of one (train ``a``, serve ``b``) slice pair, as numpy arrays of the block's rows.

    Where a row holds a NaN or Inf the float fields are meaningless: the caller drops those rows.
    """

    aa: np.ndarray  # float64: ||a||^2
    bb: np.ndarray  # float64: ||b||^2
    dd: np.ndarray  # float64: ||a - b||^2
    dmax: np.ndarray  # float64: max |a - b|
    nan_a: np.ndarray  # bool: the row has a NaN
    inf_a: np.ndarray  # bool: the row has an Inf and no NaN
    const_a: np.ndarray  # bool: finite, not all zero, every value equal
    nan_b: np.ndarray
    inf_b: np.ndarray
    const_b: np.ndarray


class Kernels(Protocol):
    """What compare needs from a device. Arrays are numpy on the CPU, tensors on a torch device."""

    name: str
    block_bytes: int  # float32 bytes of one streaming block, both dumps together

    def load(self, raw: np.ndarray, encoding: str) -> Any:
        """Stored values (bf16 bits, fp16, fp32), ready for the other kernels: a tensor widened to
        float32 on a torch device; on the CPU the stored rows themselves, widened slice by slice
        where they are measured. Either can be sliced ``[rows][:, columns]``."""

    def row_terms(self, pairs: Sequence[tuple[Any, Any]]) -> list[RowTerms]:
        """:class:`RowTerms` of each ``(a, b)`` pair of loaded slices ``[n, H]``."""

    def serve_units(self, block: Any, k: int, hidden_size: int) -> Any:
        """The serve side of the mapping search for one group of rows (``k`` slices of ``block``)."""

    def train_units(self, train_slice: Any) -> Any:
        """The train side of the mapping search: one candidate slice ``[rows, H]`` of a group."""

    def candidate_sums(self, serve: Any, train: Any) -> np.ndarray:
        """``[4, k]``: per serve slice, the sum over rows of the cosine with the candidate, rows valid
        on both sides, serve ||x||^2 and train ||x||^2 over those rows."""

    def close(self) -> None: ...


def kernels_for(device: "str | Kernels | None") -> Kernels:
    """Kernels for ``"cpu"`` (numpy, the default), a torch device name (``"cuda"``, ``"cuda:1"``), or
    an object that already is one."""
    if device is None or device == "cpu":
        from alignprobe.compare.kernels.numpy_kernels import NumpyKernels

        return NumpyKernels()
    if not isinstance(device, str):
        return device
    from alignprobe.compare.kernels.torch_kernels import TorchKernels

    return TorchKernels(device)

