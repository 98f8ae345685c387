"""explain/rotation.py: an orthogonal map of the expected slice (QuaRot / SpinQuant weights on one side),
fitted on some rows and scored on held-out ones; never fitted to noise, and no rotation where the
least-squares map is a stretch near the identity (the isometry test on the Procrustes path)."""

import numpy as np

from explain_rows import H, code_of, explained, tried


def test_a_rotated_slice_is_named_on_held_out_rows():
    q, _ = np.linalg.qr(np.random.default_rng(5).standard_normal((H, H)))
    e = explained(lambda t, s, p, end: t[(2, "post")] @ q)
    assert e.winner.name == "rotation" and e.winner.held_out_rel_rms < 0.01 and code_of("rotation") == "rotated"


def test_noise_is_never_fitted_by_a_flexible_transform():
    # unrelated rows: a rotation fitted on the fit rows must not carry over to the held-out rows
    e = explained(lambda t, s, p, end: np.random.default_rng(9).standard_normal((len(s), H)))
    assert e.winner.name == "nothing_fits"
    rotation = tried(e, "rotation")
    assert rotation.fit_rel_rms < rotation.held_out_rel_rms and not rotation.fits


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
    e = explained(lambda t, s, p, end: t[(2, "post")] @ near_identity(0.1, 0.04, 3))
    rotation = tried(e, "rotation")
    assert rotation.held_out_rel_rms < 0.07 and not rotation.fits and e.winner.name != "rotation", rotation.summary
    assert rotation.params["isometry_defect"] > 0.5 * rotation.params["linear_map_distance_from_identity"]
    # a rotation farther from the identity than its stretch is still one, as is a pure rotation
    e = explained(lambda t, s, p, end: t[(2, "post")] @ near_identity(0.3, 0.02, 4))
    assert e.winner.name == "rotation", [(f.name, f.summary) for f in e.tried]
    q, _ = np.linalg.qr(np.random.default_rng(5).standard_normal((H, H)))
    e = explained(lambda t, s, p, end: t[(2, "post")] @ q)
    assert e.winner.name == "rotation" and e.winner.params["isometry_defect"] < 0.01
