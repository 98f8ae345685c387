"""The rotation's span test and the per-channel scale on synthetic wide rows (fast): fewer fit rows
than 2H, rows with the structure of hidden states (a shared direction, a few dominant ones, a tail)."""

import numpy as np
import pytest

from alignprobe.compare.explain import explain_slice
from alignprobe.compare.explain.base import ExplainRows
from alignprobe.compare.explain.rotation import Rotation

H, SAMPLES, LENGTH = 512, 6, 40  # 240 rows, 120 fit rows: far fewer than 2H


def states(seed=0):
    rng = np.random.default_rng(seed)
    basis = rng.standard_normal((24, H)) * np.geomspace(4.0, 0.3, 24)[:, None]
    x = rng.standard_normal((SAMPLES * LENGTH, 24)) @ basis + 3.0 * rng.standard_normal(H)
    return x + 0.5 * rng.standard_normal(x.shape)


def noisy(x, size, seed=3):
    rng = np.random.default_rng(seed)
    return x + size * np.linalg.norm(x, axis=1, keepdims=True) / np.sqrt(H) * rng.standard_normal(x.shape)


def rows_for(serve, train):
    sample = np.repeat(np.arange(SAMPLES), LENGTH)
    position = np.tile(np.arange(LENGTH), SAMPLES)
    return ExplainRows(serve=serve[:, None, :].astype(np.float32), train={(2, "post"): train.astype(np.float32)},
                       sample=sample, position=position, sample_ids=[f"s{i}" for i in range(SAMPLES)],
                       fit=((position // 8) + sample) % 2 == 0, expected=[(2, "post")], claimed=[2], num_layers=4,
                       tolerance=0.07, drift_tolerance=0.2, position_growth=3.0, train_provenance={},
                       serve_provenance={})


def orthogonal(seed=5):
    q, r = np.linalg.qr(np.random.default_rng(seed).standard_normal((H, H)))
    return q * np.sign(np.diag(r))


def test_a_rotation_with_drift_is_named_on_the_span_with_its_scale():
    a = states()
    e = explain_slice(rows_for(noisy(2.0 * a @ orthogonal(), 0.02), a), 0, "x")
    assert e.winner.name == "rotation" and e.winner.held_out_rel_rms < 0.07, e.winner.summary
    p = e.winner.params
    assert p["method"] == "span" and p["fit_rows"] < 2 * H and p["scale"] == pytest.approx(2.0, rel=0.01)
    assert p["distance_from_identity"] > 0.9 and p["span_rank"] > 0


def test_per_channel_scale_from_few_rows_and_identity_first():
    a = states()
    w = np.exp(np.random.default_rng(1).normal(0.0, 0.4, H))
    e = explain_slice(rows_for(noisy(a * w, 0.01), a), 0, "x")
    assert e.winner.name == "channel_scale" and e.winner.params["weight_max"] == pytest.approx(w.max(), rel=0.05)
    e = explain_slice(rows_for(noisy(a, 0.01), a), 0, "x")
    assert e.winner.name == "identity"


@pytest.mark.parametrize("size", [0.12, 0.3, 0.5])
def test_drift_is_never_a_rotation(size):
    a = states()
    e = explain_slice(rows_for(noisy(a, size), a), 0, "x")
    assert e.winner.name == ("drift" if size <= 0.2 else "nothing_fits"), e.winner.name
    rotation = next((f for f in e.tried if f.name == "rotation"), None)  # not run within drift
    assert rotation is None or not rotation.fits


def test_unrelated_rows_and_another_rotation_of_other_rows_are_no_rotation():
    a, other = states(0), states(9)
    for serve in (other, other @ orthogonal()):
        e = explain_slice(rows_for(serve, a), 0, "x")
        assert e.winner.name == "nothing_fits"
        rotation = Rotation().fit(rows_for(serve, a), 0)
        assert rotation.params["method"] == "span" and not rotation.fits and rotation.held_out_rel_rms > 0.2
