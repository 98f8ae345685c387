"""The streaming block grows with the measuring threads, and the block size changes no result.

A many-core host measures in blocks four times larger than the 2-core default
(compare/kernels/numpy_kernels.py ``block_bytes_for``); a block's size only changes where the
running sums are cut, so the result is the same: counts, percentiles, minima and maxima exactly,
the sums to float64 rounding.
"""

import math

import numpy as np
import pytest

from alignprobe.compare import compare
from alignprobe.compare.kernels.numpy_kernels import NumpyKernels, block_bytes_for
from alignprobe.dump.reader import DEFAULT_BLOCK_BYTES
from compare_helpers import make_samples, write_serve, write_train

EXACT = ("tokens", "cosine_p1", "cosine_p5", "cosine_p50", "cosine_min", "max_abs_diff", "excluded_rows",
         "train_health", "serve_health", "cosine_cdf")
SUMS = ("cosine_mean", "rel_rms", "sqnr_db", "norm_ratio")


def test_the_block_grows_with_the_threads_and_stays_at_the_default_on_two_cores():
    assert [block_bytes_for(t) for t in (1, 2, 3)] == [DEFAULT_BLOCK_BYTES] * 3
    assert block_bytes_for(4) == 2 * DEFAULT_BLOCK_BYTES
    assert NumpyKernels(threads=8).block_bytes == block_bytes_for(8) == 4 * DEFAULT_BLOCK_BYTES
    assert NumpyKernels(threads=2).block_bytes == DEFAULT_BLOCK_BYTES


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("blocks")
    samples = make_samples(num=6, length=40)
    drift = lambda x, sid: x * 1.01 + 0.02 * np.sin(x)  # noqa: E731 - a drift that varies row by row
    return write_train(d / "train.h5", samples), write_serve(d / "serve.h5", samples, taps=(3, 4, 5), transform=drift)


def test_block_size_changes_no_result(pair):
    many = compare(*pair, tokenizer=None, block_bytes=1 << 12)  # blocks of a few rows
    one = compare(*pair, tokenizer=None, block_bytes=block_bytes_for(8))  # the whole pair in one block
    assert many.verdict == one.verdict
    assert [(f.code, f.severity) for f in many.findings] == [(f.code, f.severity) for f in one.findings]
    for ms, os_ in zip(many.streams, one.streams, strict=True):
        for m, o in zip(ms.slices, os_.slices, strict=True):
            for name in EXACT:
                assert getattr(m, name) == getattr(o, name), name
            for name in SUMS:
                assert math.isclose(getattr(m, name), getattr(o, name), rel_tol=1e-12), name
            assert [(b.start, b.stop, b.tokens) for b in m.positions] == [(b.start, b.stop, b.tokens) for b in o.positions]
    assert [m.best for s in many.mappings for m in s.matches] == [m.best for s in one.mappings for m in s.matches]


def test_a_pass_stopped_midway_returns_at_once(pair):
    # The read-ahead may be waiting for one of the pass's few read buffers (dump/block_buffers.py)
    # when the pass stops: it gives up, and the error comes back instead of a hang.
    class Stop(Exception):
        pass

    def progress(done, total):
        raise Stop

    with pytest.raises(Stop):
        compare(*pair, tokenizer=None, block_bytes=1 << 12, progress=progress)
