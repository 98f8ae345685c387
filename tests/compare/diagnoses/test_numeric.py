"""compare/diagnoses/numeric.py: how far the right states are apart: a scale, drift past the tolerance,
drift that grows along the sequence, all-zero rows."""

import numpy as np
import pytest

from alignprobe.compare import compare
from compare_helpers import H, make_samples, write_serve, write_train


@pytest.fixture
def samples():
    return make_samples(num=6, length=40)


def served(tmp_path, samples, transform):
    serve = write_serve(tmp_path / "s.h5", samples, transform=transform)
    return compare(write_train(tmp_path / "t.h5", samples), serve)


def noise(x, level, rng, along=None):
    scale = level * np.linalg.norm(x, axis=1, keepdims=True) / np.sqrt(x.shape[1])
    grow = 1.0 if along is None else np.arange(len(x))[:, None] / len(x)
    return x + (scale * grow * rng.standard_normal(x.shape)).astype(np.float32)


def test_a_scale_is_an_error_with_the_norm_ratio(tmp_path, samples):
    f = served(tmp_path, samples, lambda x, sid: 3 * x).finding("scale_mismatch")
    assert f.severity == "error" and [s["norm_ratio"] for s in f.evidence["slices"]] == pytest.approx([3.0] * 3)


def test_drift_between_the_warn_and_fail_tolerances_warns(tmp_path, samples):
    rng = np.random.default_rng(0)
    r = served(tmp_path, samples, lambda x, sid: noise(x, 0.05, rng))
    f = r.finding("numeric_drift")
    assert f.severity == "warn" and r.verdict == "WARN"
    worst = max(m.rel_rms for stream in r.streams for m in stream.slices)
    assert f.evidence["tolerance"]["warn_rel_rms"] <= worst < f.evidence["tolerance"]["fail_rel_rms"]


def test_drift_that_grows_along_the_sequence_is_position_drift_too(tmp_path, samples):
    rng = np.random.default_rng(0)
    r = served(tmp_path, samples, lambda x, sid: noise(x, 0.15, rng, along=True))
    assert r.finding("position_drift").severity == "warn" and r.finding("numeric_drift") is not None


def test_all_zero_rows_past_the_fail_fraction_are_an_error(tmp_path, samples):
    def zeroed(x, sid):
        x = x.copy()
        x[:10, :H] = 0  # the first slice's first 10 rows of every sample
        return x

    f = served(tmp_path, samples, zeroed).finding("degenerate")
    assert f.severity == "error" and f.evidence["worst_fraction"] == pytest.approx(0.25)
    assert f.evidence["slices"][0]["serve_zero_rows"] == 60 and f.evidence["slices"][0]["label"] == "HF[2]"
