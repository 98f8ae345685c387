"""Streaming metrics against independent whole-array formulas (torch, float64)."""

import math

import numpy as np
import pytest
import torch

from alignprobe.compare.kernels.numpy_kernels import token_terms
from alignprobe.compare.metrics import SliceAccumulator, position_edges, token_cosine


def _pair(n=300, h=48, scale=1.0, noise=0.05, seed=0):
    g = np.random.default_rng(seed)
    a = g.standard_normal((n, h)).astype(np.float32) * np.linspace(0.5, 3, h, dtype=np.float32)
    b = (scale * a + noise * g.standard_normal((n, h))).astype(np.float32)
    positions = np.concatenate([np.arange(100), np.arange(100), np.arange(100)])[:n]
    return a, b, positions


def _feed(a, b, positions, block=37, **kw):
    acc = SliceAccumulator(max_position=int(positions.max()) + 1, **kw)
    for s in range(0, len(a), block):
        acc.update(a[s : s + block], b[s : s + block], positions[s : s + block])
    return acc


def test_metrics_match_whole_array_formulas():
    a, b, pos = _pair()
    acc = _feed(a, b, pos)
    m = acc.summary()
    ta, tb = torch.from_numpy(a).double(), torch.from_numpy(b).double()
    cos = torch.nn.functional.cosine_similarity(ta, tb, dim=1).numpy()
    assert m["tokens"] == len(a)
    # per-row sums run in float32 BLAS: about 1e-7 relative, far below any tolerance that matters
    assert m["cosine_mean"] == pytest.approx(cos.mean(), abs=1e-6)
    assert m["cosine_min"] == pytest.approx(cos.min(), abs=1e-6)
    # percentiles are kept in float32
    assert m["cosine_p1"] == pytest.approx(np.percentile(cos, 1), abs=1e-6)
    assert m["cosine_p5"] == pytest.approx(np.percentile(cos, 5), abs=1e-6)
    assert m["cosine_p50"] == pytest.approx(np.median(cos), abs=1e-6)
    rel = (torch.linalg.norm(tb - ta) / torch.linalg.norm(ta)).item()
    assert m["rel_rms"] == pytest.approx(rel, rel=1e-6)
    assert m["sqnr_db"] == pytest.approx(-20 * math.log10(rel), rel=1e-6)
    assert m["norm_ratio"] == pytest.approx((torch.linalg.norm(tb) / torch.linalg.norm(ta)).item(), rel=1e-6)
    assert m["max_abs_diff"] == pytest.approx(np.abs(a.astype(np.float64) - b).max(), rel=1e-6)


def test_a_50x_scale_error_is_caught_by_norm_ratio_not_cosine():
    a, b, pos = _pair(scale=50.0, noise=0.0)
    m = _feed(a, b, pos).summary()
    assert m["cosine_mean"] > 0.99999
    assert m["norm_ratio"] == pytest.approx(50.0, rel=1e-5)
    assert m["rel_rms"] == pytest.approx(49.0, rel=1e-5)


def test_cosine_keeps_precision_near_one():
    g = np.random.default_rng(1)
    a = g.standard_normal((64, 4096)).astype(np.float32)
    b = a + (1e-4 * g.standard_normal(a.shape)).astype(np.float32)
    cos = token_cosine(*token_terms(a, b))
    ref = torch.nn.functional.cosine_similarity(torch.from_numpy(a).double(), torch.from_numpy(b).double(), dim=1)
    # 1 - cos is about 5e-9 here: the formula must resolve it, not round it to 0
    np.testing.assert_allclose(1 - cos, 1 - ref.numpy(), rtol=1e-3)


def test_position_buckets_match_direct_grouping():
    a, b, pos = _pair()
    b = b.copy()
    b[pos >= 32] += 0.5  # drift late in the sequence
    buckets = _feed(a, b, pos).summary()["positions"]
    edges = position_edges(100)
    assert [x.start for x in buckets] == list(edges[:-1])
    for bucket in buckets:
        sel = (pos >= bucket.start) & (pos < bucket.stop)
        da, db = a[sel].astype(np.float64), b[sel].astype(np.float64)
        assert bucket.tokens == sel.sum()
        assert bucket.rel_rms == pytest.approx(np.linalg.norm(db - da) / np.linalg.norm(da), rel=1e-6)
        assert bucket.norm_ratio == pytest.approx(np.linalg.norm(db) / np.linalg.norm(da), rel=1e-6)
    assert buckets[-1].rel_rms > 3 * buckets[1].rel_rms


def test_row_health_counts_each_kind():
    x = np.ones((10, 8), dtype=np.float32) * np.arange(8, dtype=np.float32)
    x[1, 3] = np.nan
    x[2, 0] = np.inf
    x[3, :] = 0
    x[4, :] = 2.5
    x[5, 2] = np.nan
    x[5, 4] = -np.inf
    h = _feed(np.ones_like(x), x, np.arange(len(x)), block=4).summary()["serve_health"]
    assert (h.rows, h.nan_rows, h.inf_rows, h.zero_rows, h.constant_rows) == (10, 2, 1, 1, 1)


def test_nonfinite_rows_are_counted_and_left_out_of_the_numbers():
    a, b, pos = _pair()
    b = b.copy()
    b[[3, 50, 77]] = np.nan
    m = _feed(a, b, pos).summary()
    assert m["serve_health"].nan_rows == 3
    assert m["excluded_rows"] == 3
    assert m["tokens"] == len(a) - 3
    assert math.isfinite(m["cosine_mean"]) and math.isfinite(m["rel_rms"])


def test_percentile_sample_stays_bounded_and_spread():
    a, b, pos = _pair(n=300)
    acc = _feed(a, b, pos, block=16, percentile_sample=64)
    assert acc._sample_len <= 64
    full = _feed(a, b, pos).percentiles()
    capped = acc.percentiles()
    assert capped[2] == pytest.approx(full[2], abs=0.02)


def test_identical_rows_give_infinite_sqnr_and_unit_cosine():
    a, _, pos = _pair()
    m = _feed(a, a.copy(), pos).summary()
    assert m["cosine_min"] == 1.0 and m["rel_rms"] == 0.0 and m["sqnr_db"] == math.inf


def test_cosine_resolves_bf16_sized_differences():
    g = np.random.default_rng(2)
    a = g.standard_normal((256, 4096)).astype(np.float32)
    b = a + (3e-3 * g.standard_normal(a.shape)).astype(np.float32)  # 1 - cos ~ 5e-6, like bf16 rounding
    m = _feed(a, b, np.arange(256)).summary()
    ref = torch.nn.functional.cosine_similarity(torch.from_numpy(a).double(), torch.from_numpy(b).double(), dim=1)
    assert 1 - m["cosine_mean"] == pytest.approx(1 - ref.mean().item(), rel=0.02)


def test_huge_finite_values_are_not_called_nonfinite():
    a, b, pos = _pair(n=20)
    a, b = a.copy(), b.copy()
    a[4] *= 1e21
    b[4] = a[4] * 1.5
    m = _feed(a, b, pos).summary()
    assert m["train_health"].nonfinite_rows == 0 and m["excluded_rows"] == 0
    ta, tb = torch.from_numpy(a).double(), torch.from_numpy(b).double()
    assert m["norm_ratio"] == pytest.approx((torch.linalg.norm(tb) / torch.linalg.norm(ta)).item(), rel=1e-6)
