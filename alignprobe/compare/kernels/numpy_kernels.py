"""The comparer's kernels in numpy: products in float32 (BLAS), sums in float64.

The pairs of a block are measured in parallel threads: numpy releases the GIL in its loops and
BLAS calls, and a block holds several independent pairs (three aux slices and the final state, at
least), so a many-core machine keeps up with the disk (benchmarks/compare_throughput.py).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
from typing import Sequence

import numpy as np

from alignprobe.compare.kernels import RowTerms
from alignprobe.dump.encoding import from_storage
from alignprobe.dump.reader import DEFAULT_BLOCK_BYTES

MAX_THREADS = 8
MIN_TASK_ROWS = 32  # a measuring task's rows at the least: below this the hand-off costs more than it saves


def block_bytes_for(threads: int) -> int:
    """The streaming block for ``threads`` measuring threads: 8 MB for each two of them (8 MB up to
    three: cache-sized slices on a small machine; 32 MB with 8 threads).

    Each block costs the pass a fixed share of serial work (the accumulators' per-block arithmetic in
    the pass's own thread, the hand-offs to the threads, the reads' per-call overhead) while its
    arithmetic is split over the threads: with 8 threads on 16 cores, 8 MB blocks took the pass twice
    as long as 32 MB ones (benchmarks/results/compare_limits_h200_session6.txt: a 2.47 GB folder
    against its dump, warm, 5.51 s against 2.80 s). The block changes no result beyond the float64
    rounding of the running sums (tests/compare/test_streaming.py)."""
    return DEFAULT_BLOCK_BYTES * max(1, threads // 2)


class NumpyKernels:
    name = "cpu"

    def __init__(self, threads: int | None = None):
        self.threads = threads or min(MAX_THREADS, os.cpu_count() or 1)
        self.block_bytes = block_bytes_for(self.threads)
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None

    def load(self, raw: np.ndarray, encoding: str) -> "Stored":
        # Widened later, slice by slice, in the threads that measure them: widening a block whole
        # in the reading thread made that thread (read + widen) the limit of the pass.
        return Stored(raw, encoding)

    def row_terms(self, pairs: Sequence[tuple["Stored", "Stored"]]) -> list[RowTerms]:
        def measure(pair: tuple[Stored, Stored]) -> RowTerms:
            return self.pair_terms(*pair)

        if not pairs or self.threads < 2 or (len(pairs) < 2 and len(pairs[0][0].raw) < 2 * MIN_TASK_ROWS):
            return [measure(p) for p in pairs]
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(self.threads, thread_name_prefix="alignprobe-metrics")
        # A block holds fewer pairs than there are threads (three aux slices and the final state): each
        # pair's rows are split so that every thread has work. Terms are per row, so the split changes
        # no value.
        rows = len(pairs[0][0].raw)
        parts = max(1, min(-(-self.threads // len(pairs)), rows // MIN_TASK_ROWS))
        bounds = [rows * i // parts for i in range(parts + 1)]
        tasks = [(a[lo:hi], b[lo:hi]) for a, b in pairs for lo, hi in zip(bounds, bounds[1:])]
        terms = list(self._pool.map(measure, tasks))
        if parts == 1:
            return terms
        return [joined(terms[i : i + parts]) for i in range(0, len(terms), parts)]

    def pair_terms(self, a: "Stored", b: "Stored") -> RowTerms:
        return row_terms(a.widened(), b.widened())

    def serve_units(self, block: "Stored", k: int, hidden_size: int):
        x = block.widened()
        units, valid, sq = zip(*(unit_rows(x[:, j * hidden_size : (j + 1) * hidden_size]) for j in range(k)))
        return np.stack(units).reshape(k, -1), np.stack(valid).astype(np.float64), np.stack(sq)

    def train_units(self, train_slice: "Stored"):
        unit, valid, sq = unit_rows(train_slice.widened())
        return unit.ravel(), valid.astype(np.float64), sq

    def candidate_sums(self, serve, train) -> np.ndarray:
        (s_units, s_valid, s_sq), (u, v, t_sq) = serve, train
        return np.stack([s_units @ u, s_valid @ v, s_sq @ v, s_valid @ t_sq])

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


class Stored:
    """Rows as stored (bf16 bits, fp16, fp32) and their encoding; slicing keeps them stored."""

    __slots__ = ("raw", "encoding")

    def __init__(self, raw: np.ndarray, encoding: str):
        self.raw, self.encoding = raw, encoding

    def __getitem__(self, key) -> "Stored":
        return Stored(self.raw[key], self.encoding)

    def widened(self) -> np.ndarray:
        """float32, exactly (alignprobe/dump/encoding.py)."""
        return from_storage(self.raw, self.encoding)


def joined(parts: Sequence[RowTerms]) -> RowTerms:
    """The terms of consecutive row ranges, as one :class:`RowTerms` of all their rows."""
    names = [field.name for field in dataclasses.fields(RowTerms)]
    return RowTerms(*(np.concatenate([getattr(p, name) for p in parts]) for name in names))


def row_terms(a: np.ndarray, b: np.ndarray) -> RowTerms:
    """:class:`RowTerms` of float32 rows ``a``, ``b`` ``[n, H]``."""
    aa, bb = row_dot(a, a), row_dot(b, b)
    nan_a, inf_a, big_a = nonfinite_masks(a, aa)
    nan_b, inf_b, big_b = nonfinite_masks(b, bb)
    with np.errstate(all="ignore"):  # rows with NaN / Inf / overflow are flagged, and redone or dropped
        d = np.subtract(a, b)
        dd = row_dot(d, d)
        dmax = np.abs(d, out=d).max(axis=1).astype(np.float64)
    finite = ~(nan_a | inf_a | nan_b | inf_b)
    huge = finite & (big_a | big_b | ~np.isfinite(dd))
    if huge.any():  # values beyond float32 squares: redo those rows in float64
        wide_a, wide_b = a[huge].astype(np.float64), b[huge].astype(np.float64)
        aa[huge], bb[huge], dd[huge] = token_terms(wide_a, wide_b)
        dmax[huge] = np.abs(wide_a - wide_b).max(axis=1)
    return RowTerms(
        aa, bb, dd, dmax,
        nan_a, inf_a, constant_rows(a, aa, nan_a | inf_a),
        nan_b, inf_b, constant_rows(b, bb, nan_b | inf_b),
    )


def row_dot(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per-row dot products as float64.

    A float32 einsum (numpy's SIMD loop, float32 partial sums: below 1e-6 relative error at H = 7168)
    is three times faster than a float64 one, and every term summed here is a product of one row: the
    result only feeds ratios, never a difference of two large sums.

    Not BLAS: numpy holds the GIL through a batched matmul's (or np.vecdot's) per-row BLAS calls. On
    the H200 host's 16 cores those stopped at 11-13 GB/s of bf16 rows over 1-16 threads, where this
    einsum went from 9.6 to 37 GB/s, and compare ran 1.1-1.4x faster at 1 and 8 GB, cold and warm
    (verdicts the same; cosine_mean / rel_rms within 1.5e-6): benchmarks/results/issue24_h200.txt.
    """
    with np.errstate(over="ignore", invalid="ignore"):  # overflowed rows are found and redone
        return np.einsum("ij,ij->i", x, y).astype(np.float64)


def nonfinite_masks(x: np.ndarray, sq: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(NaN rows, Inf rows, finite rows whose float32 squares overflowed) from ``sq = row_dot(x, x)``.

    A row's sum of squares is finite when the row is, unless a value is beyond 1.8e19: only the
    rows with a non-finite sum are examined value by value.
    """
    n = len(x)
    nan, inf, overflow = np.zeros(n, bool), np.zeros(n, bool), np.zeros(n, bool)
    suspects = ~np.isfinite(sq)
    if suspects.any():
        rows = x[suspects]
        has_nan = np.isnan(rows).any(axis=1)
        has_inf = ~has_nan & np.isinf(rows).any(axis=1)
        nan[suspects], inf[suspects] = has_nan, has_inf
        overflow[suspects] = ~(has_nan | has_inf)
    return nan, inf, overflow


# Columns a constant row must agree on before it is checked whole: real hidden states almost never
# repeat one value at these four places, so the screen is four strided reads instead of a pass.
def _screen_columns(width: int) -> list[int]:
    return sorted({0, min(1, width - 1), width // 2, width - 1})


def constant_rows(x: np.ndarray, sq: np.ndarray, nonfinite: np.ndarray) -> np.ndarray:
    """Finite rows, not all zero, whose values are all equal (screened on a few columns, then confirmed)."""
    candidates = ~nonfinite & (sq > 0)
    for col in _screen_columns(x.shape[1])[1:]:
        candidates &= x[:, col] == x[:, 0]
    constant = np.zeros(len(x), bool)
    if candidates.any():
        rows = x[candidates]
        constant[candidates] = (rows == rows[:, :1]).all(axis=1)
    return constant


def token_terms(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: ||a||^2, ||b||^2, ||a-b||^2 in float64 (exact float64 sums: use for small inputs)."""
    aa = np.einsum("ij,ij->i", a, a, dtype=np.float64)
    bb = np.einsum("ij,ij->i", b, b, dtype=np.float64)
    d = a.astype(np.float64) - b
    dd = np.einsum("ij,ij->i", d, d)
    return aa, bb, dd


def unit_rows(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows scaled to unit norm (unusable rows zeroed), which rows are usable, and ||x||^2 per row."""
    sq = row_dot(x, x)
    valid = np.isfinite(sq) & (sq > 0)
    if valid.all():
        return x * (1.0 / np.sqrt(sq)).astype(np.float32)[:, None], valid, sq
    # the rare, slower path: NaN * 0 is NaN, so the unusable rows themselves are zeroed; finite rows
    # whose float32 squares overflowed (values past 1.8e19) are usable, normed in float64
    _, _, huge = nonfinite_masks(x, sq)
    wide = x[huge].astype(np.float64)
    sq[huge] = token_terms(wide, wide)[0]
    x = np.where(valid[:, None], x, np.float32(0))
    sq = np.where(valid | huge, sq, 0.0)
    scale = np.where(valid, 1.0 / np.sqrt(np.where(valid, sq, 1.0)), 0.0).astype(np.float32)
    units = x * scale[:, None]
    units[huge] = wide / np.sqrt(sq[huge])[:, None]
    return units, valid | huge, sq
