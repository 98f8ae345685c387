"""A large pass: numpy measures its first values while the compiled kernels start, they measure the
rest; which block runs where is fixed by its place in the pass, so every run gives the same figures."""

import builtins
import dataclasses
import threading
import time

import numpy as np
from alignprobe.compare import compare
from alignprobe.compare.kernels import choice, handover_kernels
from alignprobe.compare.kernels.fused_kernels import FusedKernels, fused_row_terms
from alignprobe.compare.kernels.handover_kernels import HandoverKernels
from alignprobe.compare.kernels.numpy_kernels import NumpyKernels, Stored, block_bytes_for, compiled_threads
from alignprobe.dump.encoding import ENCODING_BF16_BITS
from compare_helpers import make_samples, write_serve, write_train

SLICE_VALUES = 2 * 8 * 64  # one pair of 8 rows x 64 columns, both sides


def blocks(count: int) -> list[list[tuple[Stored, Stored]]]:
    """Blocks of one pair of bf16 rows, the serve side a drifted copy of the train side."""
    g = np.random.default_rng(1)
    out = []
    for _ in range(count):
        a = g.standard_normal((8, 64)).astype(np.float32)
        b = a + 0.05 * g.standard_normal((8, 64)).astype(np.float32)
        out.append([(Stored(bf16_bits(a), ENCODING_BF16_BITS), Stored(bf16_bits(b), ENCODING_BF16_BITS))])
    return out


def bf16_bits(x: np.ndarray) -> np.ndarray:
    return (x.view(np.uint32) >> 16).astype(np.uint16)


def recorded(monkeypatch) -> list[str]:
    """Which kernels measure each pair, in order."""
    ran: list[str] = []
    numpy_terms = NumpyKernels.pair_terms
    monkeypatch.setattr(NumpyKernels, "pair_terms", lambda self, a, b: ran.append("numpy") or numpy_terms(self, a, b))
    monkeypatch.setattr(FusedKernels, "pair_terms", lambda self, a, b: ran.append("compiled") or fused_row_terms(a, b))
    return ran


def test_numpy_measures_the_first_values_and_the_compiled_kernels_the_rest(monkeypatch):
    monkeypatch.setattr(handover_kernels, "NUMPY_FIRST_VALUES", 2 * SLICE_VALUES + 1)
    ran = recorded(monkeypatch)
    kernels = HandoverKernels(threads=1)
    try:
        for block in blocks(5):
            kernels.row_terms(block)
    finally:
        kernels.close()
    # the block that crosses the mark is still numpy's: the mark says where numpy may stop, not where it must
    assert ran == ["numpy", "numpy", "numpy", "compiled", "compiled"]


def test_the_handover_changes_no_figure_beyond_float32_rounding(monkeypatch):
    monkeypatch.setattr(handover_kernels, "NUMPY_FIRST_VALUES", 2 * SLICE_VALUES)
    numpy_only, handing_over = NumpyKernels(threads=1), HandoverKernels(threads=1)
    try:
        for block in blocks(4):
            for want, got in zip(numpy_only.row_terms(block), handing_over.row_terms(block)):
                for field in dataclasses.fields(want):
                    np.testing.assert_allclose(getattr(got, field.name), getattr(want, field.name), rtol=1e-5)
    finally:
        handing_over.close()


def test_without_numba_numpy_measures_the_whole_pass(monkeypatch):
    real_import = builtins.__import__

    def no_numba(name, *args, **kwargs):
        if name.startswith(("numba", "alignprobe.compare.kernels.fused_kernels")):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_numba)
    monkeypatch.setattr(handover_kernels, "NUMPY_FIRST_VALUES", 0)
    ran = recorded(monkeypatch)
    kernels = HandoverKernels(threads=1)
    try:
        for block in blocks(3):
            kernels.row_terms(block)
    finally:
        kernels.close()
    assert ran == ["numpy"] * 3


def test_blocks_are_the_compiled_kernels_size():
    kernels = HandoverKernels()
    try:
        assert kernels.block_bytes == block_bytes_for(compiled_threads()) == FusedKernels().block_bytes
    finally:
        kernels.close()


def test_how_long_the_start_takes_changes_no_figure(monkeypatch):
    monkeypatch.setattr(handover_kernels, "NUMPY_FIRST_VALUES", 2 * SLICE_VALUES)
    started = handover_kernels.started_compiled_kernels

    def slow_start():
        time.sleep(0.3)  # still starting when the handover's block comes: that block waits, it is not numpy's
        return started()

    terms = []
    for start in (started, slow_start):
        monkeypatch.setattr(handover_kernels, "started_compiled_kernels", start)
        kernels = HandoverKernels(threads=1)
        try:
            terms.append([kernels.row_terms(block) for block in blocks(4)])
        finally:
            kernels.close()
    for quick, slow in zip(*terms):
        for field in dataclasses.fields(quick[0]):
            np.testing.assert_array_equal(getattr(slow[0], field.name), getattr(quick[0], field.name))


def test_a_large_compare_runs_on_them_and_leaves_no_thread(tmp_path, monkeypatch):
    samples = make_samples(num=4, length=30)
    noisy = lambda x, sid: x * 1.01 + 0.02  # noqa: E731 - a drift big enough to measure
    pair = (write_train(tmp_path / "train.h5", samples),
            write_serve(tmp_path / "serve.h5", samples, taps=(3, 4, 5), transform=noisy))
    want = compare(*pair, tokenizer=None)
    monkeypatch.setattr(choice, "FUSED_MIN_VALUES", 0)
    made = []
    monkeypatch.setattr(choice, "HandoverKernels", lambda: made.append(HandoverKernels()) or made[-1], raising=False)
    got = compare(*pair, tokenizer=None)
    assert made and got.options["device"] == "cpu"
    assert not [t for t in threading.enumerate() if t.name.startswith("alignprobe-compile")]
    assert got.verdict == want.verdict == "FAIL"
    assert [f.code for f in got.findings] == [f.code for f in want.findings]
    assert [m.cosine_mean for s in got.streams for m in s.slices] == [m.cosine_mean for s in want.streams for m in s.slices]
