"""The fits' arithmetic (explain/base.py row_sums, RowFit) against float64 formulas computed another
way, and the shortcuts that skip work (duplicate_tap's few-channel test, row_shift's slices) against
the full computation they stand for: each shortcut gives the fit the full one gives."""

import numpy as np
import pytest
import torch

from alignprobe.compare.explain.base import SUM_CHUNK, ExplainRows, RowFit, rel_rms, row_sums, scores
from alignprobe.compare.explain.duplicate_tap import EXACT, DuplicateTap
from alignprobe.compare.explain.row_shift import RowShift


def bf16_rows(shape, seed=0):
    """Rows widened from bfloat16, as a dump's are (the case einsum's float32 accumulation is biased on)."""
    x = np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)
    return torch.from_numpy(x).bfloat16().float().numpy()


@pytest.mark.parametrize("width", [7168, 64, SUM_CHUNK + 37, 3 * SUM_CHUNK])
def test_row_sums_match_float64_sums(width):
    stack = bf16_rows((40, 3, width))
    x, y = stack[:, 0], stack[:, 1]  # strided views, as serve[:, j] is
    exact_xx = np.sum(x.astype(np.float64) ** 2, axis=1)
    exact_xy = np.sum(x.astype(np.float64) * y.astype(np.float64), axis=1)
    assert row_sums(x).dtype == np.float64
    np.testing.assert_allclose(row_sums(x), exact_xx, rtol=1e-6)
    # a dot product's error is relative to the norms, not to the (possibly small) dot itself
    assert np.max(np.abs(row_sums(x, y) - exact_xy) / exact_xx) < 1e-6
    np.testing.assert_allclose(row_sums(x[:, ::7]), np.sum(x[:, ::7].astype(np.float64) ** 2, axis=1), rtol=1e-6)
    assert row_sums(x[0]) == pytest.approx(exact_xx[0], rel=1e-6)  # one row: a scalar
    # over many rows, in float64: the bias left (row_sums) is far below float32 rounding of one value
    assert abs(row_sums(x).sum() - exact_xx.sum()) / exact_xx.sum() < 1e-7  # 2e-8 to 4e-8 measured


def test_row_fit_scores_every_subset_as_a_direct_formula():
    rng = np.random.default_rng(3)
    actual = bf16_rows((64, 300), seed=1)
    predicted = actual + 0.05 * rng.standard_normal(actual.shape).astype(np.float32)
    predicted[5] = 0  # a zero row: no cosine, as before
    fit = rng.random(64) < 0.5
    a64, p64 = actual.astype(np.float64), predicted.astype(np.float64)

    def direct(rows):
        d = a64[rows] - p64[rows]
        return np.sqrt(np.sum(d * d) / np.sum(a64[rows] ** 2))

    held_rms, held_cos, fit_rms = scores(predicted, actual, fit)
    assert held_rms == pytest.approx(direct(~fit), rel=1e-6) and fit_rms == pytest.approx(direct(fit), rel=1e-6)
    norms = np.linalg.norm(p64, axis=1) * np.linalg.norm(a64, axis=1)
    ok = (~fit) & (norms > 0)
    assert held_cos == pytest.approx(np.mean(np.sum(p64[ok] * a64[ok], axis=1) / norms[ok]), rel=1e-6)
    rows = RowFit.of(predicted, actual)
    some = rng.random(64) < 0.3
    assert rows.rel_rms(some) == pytest.approx(direct(some), rel=1e-6)
    assert rows.subset(some).rel_rms() == rows.rel_rms(some) == rel_rms(predicted[some], actual[some])
    assert rows.rel_rms(np.zeros(64, bool)) == float("inf")  # no rows: nothing to be relative to
    assert np.isnan(RowFit.of(predicted[:0], actual[:0]).mean_cosine())


def stream_rows(serve, train, samples=4, length=40, seed=0):
    sample = np.repeat(np.arange(samples), length)
    position = np.tile(np.arange(length), samples)
    return ExplainRows(serve=serve.astype(np.float32), train=train, sample=sample, position=position,
                       sample_ids=[f"s{i}" for i in range(samples)], fit=((position // 8) + sample) % 2 == 0,
                       expected=[(2, "post"), (4, "post"), (6, "post")][: serve.shape[1]], claimed=[2, 4, 6],
                       num_layers=8, tolerance=0.07, drift_tolerance=0.2, position_growth=3.0,
                       train_provenance={}, serve_provenance={})


def full_duplicate_test(rows, j):
    """The test DuplicateTap makes once a slice passes the few-channel one: over every channel."""
    b = rows.serve[rows.fit, j]
    return min(rel_rms(rows.serve[rows.fit, o], b) for o in range(rows.serve.shape[1]) if o != j) <= EXACT


@pytest.mark.parametrize("case", ["copy", "nearly", "alike", "other"])
def test_duplicate_tap_few_channels_first_decides_as_the_full_test(case):
    rng = np.random.default_rng(7)
    train = {(k, "post"): bf16_rows((160, 1024), seed=k) for k in (2, 4, 6)}
    serve = np.stack([train[(k, "post")] for k in (2, 4, 6)], axis=1)
    if case == "copy":
        serve[:, 2] = serve[:, 1]  # a layer captured twice: the same tensor
    elif case == "nearly":
        serve[:, 2] = serve[:, 1] * (1 + 1e-7)  # float32 rounding of the same values: still a copy
    elif case == "alike":  # deep layers that agree within drift, not to the bit: no copy
        serve[:, 2] = serve[:, 1] + 1e-4 * rng.standard_normal(serve[:, 1].shape).astype(np.float32)
    rows = stream_rows(serve, train)
    for j in range(3):
        found = DuplicateTap().fit(rows, j)
        assert (found is not None) == full_duplicate_test(rows, j), (case, j)
    assert (DuplicateTap().fit(rows, 2) is not None) == (case in ("copy", "nearly"))


def test_row_shift_on_slices_scores_as_on_gathered_rows():
    # rows stored by sample and position (as explaining.py gathers them) are scored on two slices;
    # the same rows in another order take the gathering path: the same fit, to rounding
    train = {(2, "post"): bf16_rows((160, 700), seed=2)}
    a = train[(2, "post")].reshape(4, 40, 700)
    shifted = np.concatenate([a[:, 3:], a[:, :3]], axis=1).reshape(160, 1, 700)  # serve row i = train row i+3
    ordered = RowShift().fit(stream_rows(shifted, train), 0)
    order = np.random.default_rng(0).permutation(160)
    rows = stream_rows(shifted[order], {k: v[order] for k, v in train.items()})
    rows.sample, rows.position = rows.sample[order], rows.position[order]
    rows.fit = ((rows.position // 8) + rows.sample) % 2 == 0
    permuted = RowShift().fit(rows, 0)
    assert ordered.params == permuted.params and ordered.params["shift"] == 3
    assert ordered.held_out_rel_rms == pytest.approx(permuted.held_out_rel_rms, abs=1e-9)
    assert ordered.held_out_rel_rms < 1e-6 and ordered.fits
    assert ordered.held_out_rows == permuted.held_out_rows
