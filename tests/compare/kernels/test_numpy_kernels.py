"""The numpy kernels' tiles and tasks give row_terms' terms exactly, whatever the rows, tiles or threads.

The pass measures stored rows a tile at a time in buffers it keeps, in tasks cut from each pair's
rows (compare/kernels/numpy_kernels.py); every row is measured on its own either way, so the terms
are those of :func:`row_terms` on the widened rows, bit for bit, rare rows included.
"""

import dataclasses

import numpy as np
import pytest

from alignprobe.compare.kernels import numpy_kernels
from alignprobe.compare.kernels.numpy_kernels import NumpyKernels, Stored, row_terms, tiled_row_terms
from alignprobe.dump.encoding import ENCODING_BF16_BITS, ENCODING_NATIVE, from_storage

H = 64


def awkward_rows(seed=0):
    """Random rows plus one of each kind that sends a task to row_terms whole."""
    g = np.random.default_rng(seed)
    a = g.standard_normal((12, H)).astype(np.float32)
    b = (a + 0.05 * g.standard_normal((12, H))).astype(np.float32)
    a[1, 5] = np.nan
    b[2, 7] = np.inf
    a[3] = 0.0
    b[4] = 0.25  # constant
    a[5] *= 3e19  # float32 squares overflow
    b[5] *= 3e19
    b[6, [0, 1, H // 2, H - 1]] = 1.5  # passes the constant screen, is not constant
    return a, b


def _bits(x: np.ndarray) -> np.ndarray:
    return (x.view(np.uint32) >> 16).astype(np.uint16)


def _plain(rows=40, seed=1):
    g = np.random.default_rng(seed)
    a = g.standard_normal((rows, H)).astype(np.float32)
    return a, (a + 0.05 * g.standard_normal(a.shape)).astype(np.float32)


def _assert_same(got, want):
    for field in dataclasses.fields(want):
        x, y = getattr(got, field.name), getattr(want, field.name)
        assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=True), field.name


@pytest.mark.parametrize("rows", ["plain", "awkward"])
@pytest.mark.parametrize("encoding", [ENCODING_BF16_BITS, ENCODING_NATIVE])
@pytest.mark.parametrize("tile_rows", [1, 3, 1000])
def test_tiles_give_row_terms_exactly(monkeypatch, rows, encoding, tile_rows):
    monkeypatch.setattr(numpy_kernels, "TILE_BYTES", 4 * H * tile_rows)
    a, b = _plain() if rows == "plain" else awkward_rows()
    if encoding == ENCODING_BF16_BITS:
        a, b = _bits(a), _bits(b)
    want = row_terms(from_storage(a, encoding), from_storage(b, encoding))
    _assert_same(tiled_row_terms(Stored(a, encoding), Stored(b, encoding)), want)


@pytest.mark.parametrize("threads", [1, 2, 3, 8])
def test_tasks_a_thread_give_the_terms_of_one(monkeypatch, threads):
    monkeypatch.setattr(numpy_kernels, "TILE_BYTES", 4 * H * 2)
    a, b = awkward_rows()
    c, d = _plain(rows=len(a))
    pairs = [(Stored(_bits(a), ENCODING_BF16_BITS), Stored(_bits(b), ENCODING_BF16_BITS)),
             (Stored(_bits(c), ENCODING_BF16_BITS), Stored(_bits(d), ENCODING_BF16_BITS))]
    kernels = NumpyKernels(threads=threads)
    try:
        got = kernels.row_terms_later(pairs)()
    finally:
        kernels.close()
    for (x, y), terms in zip(pairs, got, strict=True):
        _assert_same(terms, row_terms(x.widened(), y.widened()))
