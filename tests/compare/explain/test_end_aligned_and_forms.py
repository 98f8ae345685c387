"""The fourth held-out set's fixes on synthetic rows (fast): serve rows that are the train sample's last
ones (explain/end_aligned.py), a LayerNorm on one side (channel_scale's layernorm form), and a linear map
near the identity that is no rotation (rotation.py's isometry test on the Procrustes path)."""

import numpy as np

from alignprobe.compare.explain import explain_slice
from alignprobe.compare.explain.base import ExplainRows

H, SAMPLES, LENGTH = 16, 6, 48


def rows_for(serve_of, end_of=None, noise=1e-3, seed=0, mean=0.0):
    rng = np.random.default_rng(seed)
    train = {(k, "post"): (rng.standard_normal((SAMPLES * LENGTH, H)) + mean).astype(np.float32) * (1 + k)
             for k in (1, 2, 3)}
    sample = np.repeat(np.arange(SAMPLES), LENGTH)
    position = np.tile(np.arange(LENGTH), SAMPLES)
    end = {} if end_of is None else {(2, "post"): end_of(rng, sample).astype(np.float32)}
    serve = serve_of(train, end)
    serve = serve + noise * np.linalg.norm(serve, axis=1, keepdims=True) / np.sqrt(H) * rng.standard_normal(serve.shape)
    return ExplainRows(serve=serve[:, None, :].astype(np.float32), train=train, sample=sample, position=position,
                       sample_ids=[f"s{i}" for i in range(SAMPLES)], fit=((position // 8) + sample) % 2 == 0,
                       expected=[(2, "post")], claimed=[2], num_layers=4, tolerance=0.07, drift_tolerance=0.2,
                       position_growth=3.0, train_provenance={}, serve_provenance={}, end_rows=end,
                       end_offsets=[24 * (1 + i % 3) for i in range(SAMPLES)])


def end_rows(rng, sample):  # the train sample's later rows: states of their own
    return rng.standard_normal((len(sample), H)) * 3


def test_serve_rows_that_are_the_sample_end_are_named_with_each_offset():
    e = explain_slice(rows_for(lambda t, end: end[(2, "post")].copy(), end_rows), 0, "x")
    assert e.winner.name == "end_aligned_rows" and e.winner.params["offsets"]["s1"] == 48
    # ... and where the serve rows are neither the end rows nor in place, nothing fits
    e = explain_slice(rows_for(lambda t, end: np.random.default_rng(7).standard_normal((SAMPLES * LENGTH, H)),
                               end_rows), 0, "x")
    assert e.winner.name == "nothing_fits"
    # in place (the train side merely longer): identity, the end rows never tried
    e = explain_slice(rows_for(lambda t, end: t[(2, "post")].copy(), end_rows), 0, "x")
    assert e.winner.name == "identity" and "end_aligned_rows" not in [f.name for f in e.tried]


def test_a_layernorm_on_one_side_is_its_own_form():
    def layernorm(t, end):
        x = t[(2, "post")]
        x = x - x.mean(axis=1, keepdims=True)
        return x / np.sqrt(np.mean(x * x, axis=1, keepdims=True))
    e = explain_slice(rows_for(layernorm, mean=1.5), 0, "x")
    assert e.winner.name == "channel_scale" and e.winner.params["form"] == "layernorm"
    # an RMSNorm stays the rmsnorm form
    e = explain_slice(rows_for(lambda t, end: t[(2, "post")] / np.sqrt(np.mean(t[(2, "post")] ** 2, axis=1, keepdims=True)),
                               mean=1.5), 0, "x")
    assert e.winner.name == "channel_scale" and e.winner.params["form"] == "rmsnorm"


def near_identity(rotation_size, stretch_size, seed):
    """0.8 * expm(A) @ (I + S): a rotation of distance ``rotation_size`` from the identity (A antisymmetric)
    after a stretch S (symmetric, no rotation) of rel-RMS ``stretch_size``."""
    import scipy.linalg

    rng = np.random.default_rng(seed)
    g = rng.standard_normal((H, H))
    a = (g - g.T) / 2 * rotation_size * np.sqrt(2 * H) / np.linalg.norm(g - g.T) * 2
    g = rng.standard_normal((H, H))
    stretch = (g + g.T) / 2 * stretch_size * np.sqrt(H) / np.linalg.norm(g + g.T) * 2
    return 0.8 * scipy.linalg.expm(a) @ (np.eye(H) + stretch)


def test_a_linear_map_near_the_identity_is_no_rotation():
    # as far from an isometry as from the identity: Procrustes fits it within the tolerance (0.04, where
    # identity leaves 0.3), but the least-squares map is no rotation (a depth-pruned Qwen3 looked so)
    e = explain_slice(rows_for(lambda t, end: t[(2, "post")] @ near_identity(0.1, 0.04, 3)), 0, "x")
    rotation = next(f for f in e.tried if f.name == "rotation")
    assert rotation.held_out_rel_rms < 0.07 and not rotation.fits and e.winner.name != "rotation", rotation.summary
    assert rotation.params["isometry_defect"] > 0.5 * rotation.params["linear_map_distance_from_identity"]
    # a rotation farther from the identity than its stretch is still one, as is a pure rotation
    e = explain_slice(rows_for(lambda t, end: t[(2, "post")] @ near_identity(0.3, 0.02, 4)), 0, "x")
    assert e.winner.name == "rotation", [(f.name, f.summary) for f in e.tried]
    q, _ = np.linalg.qr(np.random.default_rng(5).standard_normal((H, H)))
    e = explain_slice(rows_for(lambda t, end: t[(2, "post")] @ q), 0, "x")
    assert e.winner.name == "rotation" and e.winner.params["isometry_defect"] < 0.01
