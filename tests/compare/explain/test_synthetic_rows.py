"""The explanations on synthetic rows (fast): each planted transform is named with its parameters,
a flexible one does not win on noise, and compare/result.py imports nothing from the report."""

import ast
import pathlib

import numpy as np
import pytest

from alignprobe.compare.explain import explain_slice
from alignprobe.compare.explain.base import ExplainRows

H, SAMPLES, LENGTH = 16, 6, 48


def rows_for(serve_of, noise=1e-3, seed=0, keys=(1, 2, 3)):
    rng = np.random.default_rng(seed)
    train = {(k, "post"): rng.standard_normal((SAMPLES * LENGTH, H)).astype(np.float32) * (1 + k) for k in keys}
    sample = np.repeat(np.arange(SAMPLES), LENGTH)
    position = np.tile(np.arange(LENGTH), SAMPLES)
    serve = serve_of(train, sample, position)
    serve = serve + noise * np.linalg.norm(serve, axis=1, keepdims=True) / np.sqrt(H) * rng.standard_normal(serve.shape)
    return ExplainRows(serve=serve[:, None, :].astype(np.float32), train=train, sample=sample, position=position,
                       sample_ids=[f"s{i}" for i in range(SAMPLES)], fit=((position // 8) + sample) % 2 == 0,
                       expected=[(2, "post")], claimed=[2], num_layers=4, tolerance=0.07, drift_tolerance=0.2,
                       position_growth=3.0, train_provenance={}, serve_provenance={})


def test_identity_within_noise_and_its_runner_up():
    e = explain_slice(rows_for(lambda t, s, p: t[(2, "post")].copy()), 0, "x")
    assert e.winner.name == "identity" and e.winner.held_out_rel_rms < 0.01 and e.runner_up is not None


def test_scale_offset_rotation_and_row_shift_named_with_parameters():
    e = explain_slice(rows_for(lambda t, s, p: 3.0 * t[(2, "post")]), 0, "x")
    assert e.winner.name == "scalar_scale" and e.winner.params["factor"] == pytest.approx(3.0, rel=1e-2)
    e = explain_slice(rows_for(lambda t, s, p: t[(3, "post")].copy()), 0, "x")
    assert e.winner.name == "index_offset" and e.winner.params["offset"] == 1
    q, _ = np.linalg.qr(np.random.default_rng(5).standard_normal((H, H)))
    e = explain_slice(rows_for(lambda t, s, p: t[(2, "post")] @ q), 0, "x")
    assert e.winner.name == "rotation" and e.winner.held_out_rel_rms < 0.01

    def shifted(t, s, p):
        a = t[(2, "post")].reshape(SAMPLES, LENGTH, H)
        return np.roll(a, -2, axis=1).reshape(-1, H)

    e = explain_slice(rows_for(shifted), 0, "x")
    assert e.winner.name == "row_shift" and e.winner.params["shift"] == 2


def test_noise_is_never_fitted_by_a_flexible_transform():
    # unrelated rows: a rotation fitted on the fit rows must not carry over to the held-out rows
    e = explain_slice(rows_for(lambda t, s, p: np.random.default_rng(9).standard_normal((len(s), H))), 0, "x")
    assert e.winner.name == "nothing_fits"
    rotation = next(f for f in e.tried if f.name == "rotation")
    assert rotation.fit_rel_rms < rotation.held_out_rel_rms and not rotation.fits


def test_result_module_imports_nothing_from_the_report():
    source = pathlib.Path(__file__).parents[3] / "alignprobe" / "compare" / "result.py"
    tree = ast.parse(source.read_text())
    names = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module]
    names += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert not [n for n in names if n.startswith("alignprobe.report")]
