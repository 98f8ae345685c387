"""The compiled kernels give numpy's terms (to float32 rounding) and exactly numpy's flags, on every
kind of row, every stored dtype, any bf16 bit pattern, and however rows are spread over threads."""

import dataclasses
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from alignprobe.compare import compare
from alignprobe.compare.kernels import choice, numpy_kernels
from alignprobe.compare.kernels.fused_kernels import FusedKernels, fused_row_terms
from alignprobe.compare.kernels.numpy_kernels import NumpyKernels, Stored, row_terms
from alignprobe.dump.encoding import ENCODING_BF16_BITS, ENCODING_NATIVE
from compare_helpers import awkward_rows, make_samples, write_serve, write_train


def bf16_bits(x: np.ndarray) -> np.ndarray:
    return (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def stored_pairs():
    """awkward_rows (NaN, Inf, zero, constant, past float32's squares, a screen-passing row) plus
    rows of +0 and -0, a row equal on both sides and one at float32's limit, in each stored form."""
    a, b = awkward_rows(3)
    more = np.random.default_rng(4).standard_normal((2, 4, a.shape[1])).astype(np.float32)
    a, b = np.vstack([a, more[0]]), np.vstack([b, more[1]])
    a[12, ::2], a[12, 1::2] = 0.0, -0.0
    b[13] = a[13]
    a[14, 0], b[14, 1] = 3e38, -3e38
    a[15, 2], a[15, 3] = np.inf, np.nan  # both: counted as NaN
    with np.errstate(over="ignore"):  # the limit's row is Inf in float16: a row of its own kind there
        return [
            (Stored(bf16_bits(a), ENCODING_BF16_BITS), Stored(bf16_bits(b), ENCODING_BF16_BITS)),
            (Stored(a, ENCODING_NATIVE), Stored(b, ENCODING_NATIVE)),
            (Stored(a.astype(np.float16), ENCODING_NATIVE), Stored(b.astype(np.float16), ENCODING_NATIVE)),
        ]


def assert_like_numpy(a: Stored, b: Stored, got):
    with np.errstate(all="ignore"):
        want = row_terms(a.widened(), b.widened())
    usable = ~(want.nan_a | want.inf_a | want.nan_b | want.inf_b)
    for field in dataclasses.fields(want):
        w, g = getattr(want, field.name), getattr(got, field.name)
        if w.dtype == bool:
            np.testing.assert_array_equal(g, w, err_msg=field.name)
        else:  # numpy sums in float32 partials (below 1e-5 relative at these widths), these in float64
            np.testing.assert_allclose(g[usable], w[usable], rtol=1e-5, atol=0, err_msg=field.name)


@pytest.mark.parametrize("which", ["bf16 bits", "float32", "float16"])
def test_terms_and_flags_are_numpys_on_every_kind_of_row(which):
    a, b = stored_pairs()[["bf16 bits", "float32", "float16"].index(which)]
    got = fused_row_terms(a, b)
    assert_like_numpy(a, b, got)
    assert got.nan_a[1] and got.inf_b[2] and got.const_b[4] and not got.const_b[6] and got.nan_a[15]
    assert got.aa[3] == 0 and got.dd[13] == 0 and not got.const_a[12]


def test_sums_are_float64_exact_where_numpy_redoes_rows():
    a, b = stored_pairs()[1]
    got = fused_row_terms(a, b)
    x, y = a.raw.astype(np.float64), b.raw.astype(np.float64)
    usable = np.isfinite(x).all(axis=1) & np.isfinite(y).all(axis=1)
    for name, want in (("aa", (x * x).sum(1)), ("bb", (y * y).sum(1)), ("dd", ((x - y) ** 2).sum(1)),
                       ("dmax", np.abs(x - y).max(1))):
        np.testing.assert_allclose(getattr(got, name)[usable], want[usable], rtol=1e-12, err_msg=name)
    assert usable[5] and usable[14]  # past float32's squares and at its limit: measured, not dropped


@settings(max_examples=60, deadline=None)
@given(hnp.arrays(np.uint16, st.tuples(st.integers(1, 6), st.integers(1, 40)), elements=st.integers(0, 0xFFFF)),
       st.data())
def test_any_bf16_bit_patterns_give_exact_terms_and_numpys_nonfinite_flags(a, data):
    """Against float64 of the values, not numpy's float32 sums: those lose squares below 1e-19.5
    (bf16 reaches 1e-40), which float64 keeps, so a row of tiny equal values is constant here."""
    b = data.draw(hnp.arrays(np.uint16, a.shape, elements=st.integers(0, 0xFFFF)))
    pair = Stored(a, ENCODING_BF16_BITS), Stored(b, ENCODING_BF16_BITS)
    got = fused_row_terms(*pair)
    with np.errstate(all="ignore"):
        want = row_terms(pair[0].widened(), pair[1].widened())
        x, y = (s.widened().astype(np.float64) for s in pair)
        exact = {"aa": (x * x).sum(1), "bb": (y * y).sum(1), "dd": ((x - y) ** 2).sum(1), "dmax": np.abs(x - y).max(1)}
    for name in ("nan_a", "inf_a", "nan_b", "inf_b"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)
    usable = np.isfinite(x).all(1) & np.isfinite(y).all(1)
    for name, values in exact.items():
        np.testing.assert_allclose(getattr(got, name)[usable], values[usable], rtol=1e-12, atol=0, err_msg=name)
    for side, v in (("a", x), ("b", y)):
        constant = np.isfinite(v).all(1) & ((v * v).sum(1) > 0) & (v == v[:, :1]).all(1)
        np.testing.assert_array_equal(getattr(got, f"const_{side}"), constant, err_msg=side)


def test_a_column_slice_of_a_block_reads_as_its_copy():
    a, b = stored_pairs()[0]
    block_a, block_b = np.hstack([a.raw, a.raw[:, ::-1]]), np.hstack([b.raw[:, ::-1], b.raw])
    width = a.raw.shape[1]
    sliced = fused_row_terms(Stored(block_a, ENCODING_BF16_BITS)[:, width:],
                             Stored(block_b, ENCODING_BF16_BITS)[:, width:])
    copied = fused_row_terms(Stored(np.ascontiguousarray(block_a[:, width:]), ENCODING_BF16_BITS),
                             Stored(np.ascontiguousarray(block_b[:, width:]), ENCODING_BF16_BITS))
    for field in dataclasses.fields(sliced):
        np.testing.assert_array_equal(getattr(sliced, field.name), getattr(copied, field.name), err_msg=field.name)


def test_threads_and_row_splits_do_not_change_the_terms(monkeypatch):
    monkeypatch.setattr(numpy_kernels, "MIN_TASK_ROWS", 3)
    one, many = FusedKernels(threads=1), FusedKernels(threads=5)
    pairs = [tuple(Stored(np.tile(s.raw, (7, 1)), s.encoding) for s in p) for p in stored_pairs()]
    try:
        for want, got in zip(one.row_terms(pairs), many.row_terms(pairs)):
            for field in dataclasses.fields(want):
                np.testing.assert_array_equal(getattr(got, field.name), getattr(want, field.name))
    finally:
        many.close()


def test_the_pass_size_picks_the_kernels(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)  # as in a fresh process: the choice never loads it
    small, _ = choice.chosen_kernels(None, pass_values=choice.FUSED_MIN_VALUES - 1)
    large, _ = choice.chosen_kernels("cpu", pass_values=choice.FUSED_MIN_VALUES)
    asked_cuda, note = choice.chosen_kernels("cuda", cores=choice.CPU_KEEPS_UP_CORES, pass_values=choice.FUSED_MIN_VALUES)
    assert type(small) is NumpyKernels and type(large) is FusedKernels and type(asked_cuda) is FusedKernels
    assert large.name == small.name == "cpu" and note


def test_whole_compare_on_the_compiled_kernels_equals_numpys(tmp_path, monkeypatch):
    samples = make_samples(num=4, length=30)
    noisy = lambda x, sid: x * 1.01 + 0.02  # noqa: E731 - a drift big enough to measure
    pair = (write_train(tmp_path / "train.h5", samples),
            write_serve(tmp_path / "serve.h5", samples, taps=(3, 4, 5), transform=noisy))
    want = compare(*pair, tokenizer=None)
    monkeypatch.setattr(choice, "FUSED_MIN_VALUES", 0)
    measured = []
    monkeypatch.setattr(FusedKernels, "pair_terms", lambda self, a, b: measured.append(1) or fused_row_terms(a, b))
    got = compare(*pair, tokenizer=None, block_bytes=1 << 14)  # many small blocks
    assert measured, "the compiled kernels ran"
    assert got.verdict == want.verdict == "FAIL"
    assert [f.code for f in got.findings] == [f.code for f in want.findings]
    for ws, gs in zip(want.streams, got.streams):
        for wm, gm in zip(ws.slices, gs.slices):
            for name in ("cosine_mean", "cosine_p1", "cosine_min", "rel_rms", "norm_ratio", "max_abs_diff"):
                np.testing.assert_allclose(getattr(gm, name), getattr(wm, name), rtol=1e-5, atol=1e-7, err_msg=name)
            assert gm.train_health == wm.train_health and gm.serve_health == wm.serve_health
