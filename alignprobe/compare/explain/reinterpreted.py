"""Bits read in the wrong dtype: the serve slice is the expected train slice rounded to one 16-bit
format and its bits read as the other (bfloat16 read as float16, or float16 read as bfloat16): a
capture that takes an engine's raw buffer (a shared-memory segment, bytes over the wire, a safetensors
header naming the wrong dtype) in the dtype it expected rather than the one the engine ran in.

No parameter is fitted: each reading is a fixed function of the train values, scored on the held-out
rows. The read values are a monotone but far from linear function of the true ones (bfloat16's 1.0
reads as float16 1.875, its 0.01 as 1.03), so no scale, weight or rotation fits them and, without this,
the slice is `unexplained`.
"""

from __future__ import annotations

import numpy as np

from alignprobe.compare.explain.base import LARGEST_FITTED, ExplainRows, FromExpected, Key, scored
from alignprobe.compare.result import ExplanationFit


def bfloat16_read_as_float16(x: np.ndarray) -> np.ndarray:
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)  # round to nearest even
    return rounded.view(np.float16).astype(np.float32)


def float16_read_as_bfloat16(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        half = np.ascontiguousarray(x, dtype=np.float32).astype(np.float16)
    return (half.view(np.uint16).astype(np.uint32) << 16).view(np.float32)


READINGS = {"bfloat16 read as float16": bfloat16_read_as_float16,
            "float16 read as bfloat16": float16_read_as_bfloat16}


class Reinterpreted(FromExpected):
    name = "reinterpreted"
    complexity = 3
    code = "dtype_misread"
    tried_where_identity_fits = False
    fix = ("The serve values are the right numbers' bits read in another 16-bit dtype (bfloat16 as float16, "
           "or the reverse): the capture took the engine's raw buffer in the dtype it expected. Read it in "
           "the dtype the engine ran in (the server's --dtype); the states themselves are right.")

    def fit_pair(self, rows: ExplainRows, j: int, key: Key, a: np.ndarray, b: np.ndarray) -> ExplanationFit | None:
        best: tuple[float, str, np.ndarray] | None = None
        for reading, read in READINGS.items():
            # the bits are those of the values as stored, whatever power of two the rows were scaled by
            predicted = read(a / np.float32(rows.value_scale))
            predicted = np.where(np.isfinite(predicted), predicted, np.float32(0))  # an Inf / NaN bit pattern: no value
            predicted *= np.float32(rows.value_scale)
            # float16 bits read as bfloat16 reach 1e36 (float16's 65504) and 2^98 from 1e4: no state is
            # that large, and squared they overflowed the scores; at LARGEST_FITTED they still fit nothing
            np.clip(predicted, -LARGEST_FITTED, LARGEST_FITTED, out=predicted)
            fit_error = float(np.sum((predicted[rows.fit] - b[rows.fit]) ** 2, dtype=np.float64))
            if best is None or fit_error < best[0]:  # the reading is chosen on the fit rows
                best = (fit_error, reading, predicted)
        assert best is not None  # READINGS is not empty
        _, reading, predicted = best
        return scored(self, rows, predicted, b, {"reading": reading, "hf_index": key[0]},
                      f"serve = train {rows.label(key)} with its {reading}")


EXPLANATION = Reinterpreted()
