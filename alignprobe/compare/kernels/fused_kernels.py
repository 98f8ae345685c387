"""The CPU kernels with ``row_terms`` compiled (numba): one pass over a pair's stored rows, no GIL.

numpy measures a pair in about twenty calls (widen each side, three dots, the difference, its
absolute value and maximum, the screens for NaN, Inf and constant rows), each a pass over the rows
or a temporary of them, and each a hand-back of the GIL. On the H200 host's 16 cores that made the
pass GIL-bound, not memory-bound: the metrics threads waited on each other's hand-backs, and compare
from the page cache stayed at 0.4-0.55x of the raw read (benchmarks/README.md, issue 24). Here a
pair is one call that holds no GIL: each value is read once as stored (bf16 bits widened by a shift,
float32 as is), and the three sums, the maximum and the flags are made from it in registers.

Sums are float64: a float32 square cannot overflow there (3.4e38 squared is 1.2e77), so the rows
numpy redoes in float64 (values past 1.8e19) need nothing extra, and a row's sum of squares is
non-finite exactly when the row holds a NaN or an Inf. The same results as the numpy kernels to
float rounding (tests/compare/kernels/test_fused_kernels.py).

Compiled on first use and cached on disk (numba's ``cache=True``: the package's ``__pycache__``, or
numba's user cache where that is read-only), so only a machine's first comparison pays the compile.
"""

from __future__ import annotations

import os

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic, overload

from alignprobe.compare.kernels import RowTerms
from alignprobe.compare.kernels.numpy_kernels import NumpyKernels, Stored, _screen_columns
from alignprobe.dump.encoding import ENCODING_BF16_BITS

# Summation order may change (so the sums vectorise); NaN and Inf keep their meaning, which the
# flags need: numba's full fastmath would let the compiler assume neither occurs.
_REORDER = {"reassoc", "contract", "nsz"}


@intrinsic
def _float32_from_bits(typingctx, bits):
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())

    return types.float32(types.uint32), codegen


def _value(x):  # pragma: no cover - replaced by its overload inside compiled code
    raise NotImplementedError


@overload(_value)
def _value_of(x):
    if x == types.uint16:  # bfloat16 bits: the upper half of a float32
        return lambda x: np.float64(_float32_from_bits(np.uint32(x) << 16))
    return lambda x: np.float64(x)


@njit(nogil=True, cache=True, fastmath=_REORDER)
def _side_flags(x, i, sq, screen, flags, at):
    """NaN / Inf / constant flags of row ``i`` of ``x`` into ``flags[at : at + 3, i]``."""
    if not np.isfinite(sq):  # only a NaN or an Inf makes a float64 sum of float32 squares non-finite
        has_nan = False
        for j in range(x.shape[1]):
            if np.isnan(_value(x[i, j])):
                has_nan = True
                break
        flags[at, i] = has_nan
        flags[at + 1, i] = not has_nan
        return
    if sq == 0.0:
        return
    # Stored values compared as stored: with a finite, non-zero sum of squares, values are equal
    # exactly when their bits are (only +0 and -0 differ in bits, and a constant row is not zero).
    first = x[i, 0]
    for col in screen:  # real states almost never repeat one value here: a few reads, not a pass
        if x[i, col] != first:
            return
    for j in range(x.shape[1]):
        if x[i, j] != first:
            return
    flags[at + 2, i] = True


@njit(nogil=True, cache=True, fastmath=_REORDER)
def _pair_terms(a, b, screen, sums, flags):
    """Per row of ``a``, ``b`` (stored values, ``[n, H]``): ``sums[:, i]`` = ||a||^2, ||b||^2,
    ||a-b||^2, max|a-b|; ``flags[:, i]`` = NaN, Inf, constant of a, then of b."""
    for i in range(a.shape[0]):
        aa = 0.0
        bb = 0.0
        dd = 0.0
        dmax = 0.0
        for j in range(a.shape[1]):
            x = _value(a[i, j])
            y = _value(b[i, j])
            d = x - y
            aa += x * x
            bb += y * y
            dd += d * d
            dmax = max(dmax, abs(d))
        sums[0, i] = aa
        sums[1, i] = bb
        sums[2, i] = dd
        sums[3, i] = dmax
        _side_flags(a, i, aa, screen, flags, 0)
        _side_flags(b, i, bb, screen, flags, 3)


def fused_row_terms(a: Stored, b: Stored) -> RowTerms:
    """:class:`RowTerms` of a pair of stored slices ``[n, H]``, in one compiled pass."""
    x, y = _compiled_form(a), _compiled_form(b)
    n, width = x.shape
    sums, flags = np.empty((4, n)), np.zeros((6, n), np.bool_)
    _pair_terms(x, y, np.array(_screen_columns(width)[1:], np.int64), sums, flags)
    return RowTerms(sums[0], sums[1], sums[2], sums[3], *flags)


def _compiled_form(s: Stored) -> np.ndarray:
    """The stored rows in a dtype the compiled pass reads: bf16 bits and float32 as they are;
    float16 (which numba does not compute in) widened to float32 first, exactly."""
    if s.encoding == ENCODING_BF16_BITS or s.raw.dtype == np.float32:
        return s.raw
    return s.widened()


MAX_THREADS = 16  # holding no GIL, 16 threads measured 8 GB a dump warm 1.15x faster than 8 (the H200 host)


class FusedKernels(NumpyKernels):
    """:class:`NumpyKernels` with each pair's terms in one compiled, GIL-free call."""

    def __init__(self, threads: int | None = None):
        super().__init__(threads or min(MAX_THREADS, os.cpu_count() or 1))

    def pair_terms(self, a: Stored, b: Stored) -> RowTerms:
        return fused_row_terms(a, b)
