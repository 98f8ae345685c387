"""A large pass's first rows on numpy's kernels, the rest on the compiled ones once they have started.

The compiled kernels (fused_kernels.py) have a start of about a second: numba's import and the
compiled code loaded from its cache (a machine's first comparison compiles it: about 3 s). From the
page cache they measure a large pass 1.3-2x faster than numpy, but from disk the reads are the limit
and numpy keeps up with them, so there the start is all they add: 3 GB a dump, cold, they ran at
0.78-0.86x of the raw read against numpy's 0.95-1.00x in three leases on the H200 host
(benchmarks/results/issue24_final_h200.txt). So the start runs in a thread of its own while numpy
measures the pass's first NUMPY_FIRST_VALUES stored values; the blocks after those wait for it, if it
is not done yet, and run compiled.

Which kernels measure a block depends only on where the block is in the pass, never on how long
the start took, so the same comparison gives the same figures every time. Without numba, or where
it cannot cache its code, numpy measures the whole pass (the same results, only slower).
"""

from __future__ import annotations

import concurrent.futures
from typing import Sequence

import numpy as np

from alignprobe.compare.kernels import Kernels, RowTerms
from alignprobe.compare.kernels.numpy_kernels import NumpyKernels, Stored, block_bytes_for, compiled_threads
from alignprobe.dump.encoding import ENCODING_BF16_BITS, ENCODING_NATIVE

# Values numpy measures while the compiled kernels start: about 0.8 s of numpy's pass from the page cache
# on the H200 host (2.3 GB/s of stored bf16), about as long as their start takes there (0.4 s numba's
# import, 0.4 s their first calls from its cache).
NUMPY_FIRST_VALUES = 1 << 30


class HandoverKernels(NumpyKernels):
    """:class:`NumpyKernels`, whose ``row_terms`` hands over to the compiled kernels after the pass's
    first NUMPY_FIRST_VALUES values (both sides of every pair counted)."""

    def __init__(self, threads: int | None = None):
        super().__init__(threads)
        # the compiled kernels' blocks: 64 MB on their 16 threads measured 8 GB a dump from the page cache
        # at 0.78x of the raw read, 32 and 16 MB blocks at 0.58x (issue24_final_h200.txt)
        self.block_bytes = block_bytes_for(compiled_threads())
        self._measured_values = 0
        self._starting = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="alignprobe-compile")
        self._compiled = self._starting.submit(started_compiled_kernels)

    def row_terms(self, pairs: Sequence[tuple[Stored, Stored]]) -> list[RowTerms]:
        before = self._measured_values
        self._measured_values += sum(a.raw.size + b.raw.size for a, b in pairs)
        compiled = self._compiled.result() if before >= NUMPY_FIRST_VALUES else None
        return compiled.row_terms(pairs) if compiled is not None else super().row_terms(pairs)

    def close(self) -> None:
        self._starting.shutdown(cancel_futures=True)  # a start still running is waited for: its thread holds imports
        compiled = None if self._compiled.cancelled() else self._compiled.result()
        if compiled is not None:
            compiled.close()
        super().close()


def started_compiled_kernels() -> Kernels | None:
    """The compiled kernels with their code loaded (or compiled) for the dumps' usual stored forms,
    bf16 bits and float32; None where numba is missing or cannot cache its code."""
    try:
        from alignprobe.compare.kernels.fused_kernels import FusedKernels, fused_row_terms

        for dtype, encoding in ((np.uint16, ENCODING_BF16_BITS), (np.float32, ENCODING_NATIVE)):
            row = Stored(np.zeros((1, 8), dtype), encoding)
            fused_row_terms(row, row)
    except (ImportError, RuntimeError, OSError):  # numba raises RuntimeError where it has nowhere to cache
        return None
    return FusedKernels()
