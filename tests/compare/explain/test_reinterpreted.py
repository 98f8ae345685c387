"""explain/reinterpreted.py: the expected slice's 16-bit patterns read in the other 16-bit format
(dtype_misread), named with the reading."""

import numpy as np

from explain_rows import explained, code_of


def bf16_read_as_fp16(x: np.ndarray) -> np.ndarray:
    bits = (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return bits.view(np.float16).astype(np.float32)


def test_bfloat16_bits_read_as_float16_are_named():
    e = explained(lambda t, s, p, end: bf16_read_as_fp16(t[(2, "post")]))
    assert e.winner.name == "reinterpreted" and code_of(e.winner.name) == "dtype_misread"
    assert e.winner.params["reading"] == "bfloat16 read as float16"
