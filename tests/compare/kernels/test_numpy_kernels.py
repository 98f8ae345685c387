"""numpy kernels: the terms are the same however the pairs and their rows are spread over threads."""

import dataclasses

import numpy as np
import pytest

from alignprobe.compare.kernels import numpy_kernels
from alignprobe.compare.kernels.numpy_kernels import NumpyKernels
from compare_helpers import awkward_rows


def tall_pair(seed, copies=20):
    """awkward_rows stacked ``copies`` times: every kind of row, in every part of a split."""
    a, b = awkward_rows(seed)
    return np.tile(a, (copies, 1)), np.tile(b, (copies, 1))


def assert_same_terms(want, got):
    assert len(want) == len(got)
    for x, y in zip(want, got):
        for field in dataclasses.fields(x):
            np.testing.assert_array_equal(getattr(x, field.name), getattr(y, field.name), err_msg=field.name)


@pytest.mark.parametrize("threads, num_pairs, min_rows", [(4, 4, 32), (8, 1, 32), (8, 3, 1), (5, 2, 7)])
def test_threads_and_row_splits_do_not_change_the_terms(monkeypatch, threads, num_pairs, min_rows):
    monkeypatch.setattr(numpy_kernels, "MIN_TASK_ROWS", min_rows)
    one, many = NumpyKernels(threads=1), NumpyKernels(threads=threads)
    pairs = [tuple(one.load(x, "native") for x in tall_pair(seed)) for seed in range(num_pairs)]
    try:
        assert_same_terms(one.row_terms(pairs), many.row_terms(pairs))
    finally:
        many.close()


def test_a_pair_too_short_to_split_is_measured_whole():
    many = NumpyKernels(threads=8)
    pairs = [tuple(many.load(x, "native") for x in awkward_rows(0))]
    try:
        assert_same_terms(NumpyKernels(threads=1).row_terms(pairs), many.row_terms(pairs))
        assert many._pool is None  # no thread was started for it
    finally:
        many.close()
