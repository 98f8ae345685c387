"""Synthetic rows for one explanation at a time (fast): train states of HF[1..3], a serve slice planted
from them, and the ExplainRows compare would build, fit and held-out rows alternating in blocks of 8."""

from __future__ import annotations

import numpy as np

from alignprobe.compare.explain import explain_slice
from alignprobe.compare.explain.base import ExplainRows

H, SAMPLES, LENGTH = 16, 6, 48


def _settings() -> dict:
    """What every planted slice shares: expected HF[2] of 4 layers, the policy's tolerances."""
    return dict(expected=[(2, "post")], claimed=[2], num_layers=4, tolerance=0.07, drift_tolerance=0.2,
                position_growth=3.0, train_provenance={}, serve_provenance={})


def planted(serve_of, noise=1e-3, seed=0, keys=(1, 2, 3), mean=0.0, end_of=None) -> ExplainRows:
    """``serve_of(train, sample, position, end)`` plants the serve slice (expected: HF[2]) from the train
    states ``{(k, "post"): [rows, H]}``; ``end_of(rng, sample)``: the train samples' rows past the serve
    ones (the serve samples then end 24, 48 or 72 rows early). ``noise``: relative, on the serve side."""
    rng = np.random.default_rng(seed)
    train = {(k, "post"): (rng.standard_normal((SAMPLES * LENGTH, H)) + mean).astype(np.float32) * (1 + k) for k in keys}
    sample = np.repeat(np.arange(SAMPLES), LENGTH)
    position = np.tile(np.arange(LENGTH), SAMPLES)
    end = {} if end_of is None else {(2, "post"): end_of(rng, sample).astype(np.float32)}
    serve = _noisy(serve_of(train, sample, position, end), noise, rng)
    ends = {} if end_of is None else {"end_rows": end, "end_offsets": [24 * (1 + i % 3) for i in range(SAMPLES)]}
    return _rows(train, serve, sample, position, **ends)


def explained(serve_of, **kwargs):
    """The explanation of the planted slice (see :func:`planted`)."""
    return explain_slice(planted(serve_of, **kwargs), 0, "x")


def explain_rows(train, serve, sample, position, noise=0.0, seed=0):
    """The explanation of ``serve`` against ``train`` on rows of any samples and positions."""
    rows = _rows(train, _noisy(serve, noise, np.random.default_rng(seed)), sample, position)
    return explain_slice(rows, 0, "x")


def _noisy(serve, noise, rng):
    """``serve`` with Gaussian noise of relative size ``noise`` on each row."""
    return serve + noise * np.linalg.norm(serve, axis=1, keepdims=True) / np.sqrt(H) * rng.standard_normal(serve.shape)


def _rows(train, serve, sample, position, **ends) -> ExplainRows:
    """The ExplainRows of one serve slice: fit and held-out rows alternate in blocks of 8 positions."""
    return ExplainRows(serve=serve[:, None, :].astype(np.float32), train=train, sample=sample, position=position,
                       sample_ids=[f"s{i}" for i in range(int(sample.max()) + 1)],
                       fit=((position // 8) + sample) % 2 == 0, **_settings(), **ends)


def tried(explanation, name: str):
    """The fit of explanation ``name`` among those tried."""
    return next(f for f in explanation.tried if f.name == name)


def code_of(name: str) -> str | None:
    """The finding code explanation ``name`` names (its module's ``code``)."""
    from alignprobe.compare.explain import EXPLANATIONS

    return next(e.code for e in EXPLANATIONS if e.name == name)
