"""An orthogonal transform: the serve slice is the expected train slice rotated (QuaRot / SpinQuant
style rotations folded into the weights on one side), times a scale. With at least 2H fit rows it is
fitted by orthogonal Procrustes (with scale) on the fit rows and scored on the held-out rows. On a
wide model (H = 7168: ~120 sampled rows, far fewer than 2H) the rotation is tested on the span of the
fit rows instead (span_rotation.py: a rotation preserves every inner product, so held-out rows must
keep theirs), which needs only a few dozen rows whatever H is."""

from __future__ import annotations

import numpy as np

from alignprobe.compare.explain.base import ExplainRows, FromExpected, Key, rel_rms, scored
from alignprobe.compare.explain.span_rotation import SpanMap
from alignprobe.compare.result import ExplanationFit

MIN_SPAN_ROWS = 16  # fit rows and held-out rows, each, for the span test to mean anything
# the span map's distance from an isometry, at most this fraction of its distance from the identity
# (a rotation: 0.0005 of 1.03; drift linear in the state: 0.12 of 0.16; see _on_span)
ISOMETRY_DEFECT = 0.5


class Rotation(FromExpected):
    name = "rotation"
    complexity = 7
    code = "rotated"
    transform = True
    tried_where_identity_fits = False
    fix = ('The serve states are a rotation of the training ones (QuaRot / SpinQuant rotations folded into '
           "one side's weights): capture training from the rotated model, or un-rotate before the drafter.")

    def fit_pair(self, rows: ExplainRows, j: int, key: Key, a: np.ndarray, b: np.ndarray) -> ExplanationFit | None:
        hidden = a.shape[1]
        if rows.fit.sum() >= 2 * hidden:
            return self._procrustes(rows, key, a, b)
        if rows.fit.sum() < MIN_SPAN_ROWS or rows.held_out.sum() < MIN_SPAN_ROWS:
            return None
        return self._on_span(rows, key, a, b)

    def _procrustes(self, rows: ExplainRows, key, a: np.ndarray, b: np.ndarray) -> ExplanationFit:
        hidden = a.shape[1]
        fa, fb = a[rows.fit], b[rows.fit]
        u, s, vt = np.linalg.svd(fa.T @ fb)
        rotation = u @ vt
        scale = float(s.sum() / max(1e-30, np.sum(fa * fa)))
        distance = float(np.linalg.norm(rotation - np.eye(hidden)) / np.sqrt(2 * hidden))
        params = {"method": "procrustes", "hf_index": key[0], "scale": scale, "distance_from_identity": distance,
                  "determinant_sign": int(np.sign(np.linalg.det(rotation))), "fit_rows": int(rows.fit.sum())}
        out = scored(self, rows, scale * (a @ rotation), b, params,
                     f"serve = train {rows.label(key)} rotated by an orthogonal {hidden}x{hidden} matrix "
                     f"(distance from identity {distance:.2f}, scale {scale:.3g})")
        # The same isometry test as on the span (condition (3) of _on_span): with 2H rows or more
        # Procrustes always finds some orthogonal map, and one close to the identity soaks up any
        # difference that is nearly linear in the state. The least-squares map of the fit rows (their
        # span is then the whole space, or nearly) must itself be an isometry for the difference to be
        # a rotation. A depth-pruned Qwen3 (a layer dropped before the deepest tap: serve ~ (I - A) x)
        # fitted a "rotation" 0.12 from identity, scale 0.82, at held-out 0.039 with identity at 0.16
        # (tests/cases/holdout4_cases.py "pruned"); a planted rotation's map is an isometry to its noise.
        span = SpanMap(fa, fb)
        defect, span_distance = span.isometry_defect(), span.distance_from_identity()
        params["isometry_defect"], params["linear_map_distance_from_identity"] = defect, span_distance
        if out.fits and not defect <= ISOMETRY_DEFECT * span_distance:
            out.fits = False
            out.summary += f"; not named: the best linear map is {defect:.2g} from an isometry, no rotation"
        return out

    def _on_span(self, rows: ExplainRows, key, a: np.ndarray, b: np.ndarray) -> ExplanationFit | None:
        fit, held = rows.fit, rows.held_out
        factor = float(np.sum(a[fit] * b[fit], dtype=np.float64) / max(1e-30, np.sum(a[fit] ** 2, dtype=np.float64)))
        identity = rel_rms(factor * a[held], b[held])
        if identity <= rows.drift_tolerance:
            # within drift of the train rows: the span test could not name a rotation (condition (1)
            # below), so it is not run; its SVDs and QRs at H = 7168 took seconds a slice on 2 busy
            # cores, on every clean comparison
            return None
        span = SpanMap(a[fit], b[fit])
        if not span.rank:
            return None  # all-zero train rows: no direction to map
        predicted, energy, span = span_predicted(a, b, fit, span)
        distance = span.distance_from_identity()
        # The span test is nearly blind to plain drift: isotropic noise of rel-RMS eps keeps the inner
        # products of n << H rows up to O(eps^2) and reaches the span part only in part, so it scores
        # a fraction of eps as a rotation (0.25 to 0.6 of it, measured on the wide tiny models:
        # tests/compare/explain/test_wide_model.py), and that fraction shrinks as H grows past n. So a rotation is
        # named only where (1) the serve rows are farther from the train rows (after the best scalar)
        # than drift alone explains (explain_drift_rel_rms: else drift is the reading, and the test
        # cannot tell them apart), and (2) the test has the power to reject drift of the distance
        # measured: the same rows with isotropic noise of that rel-RMS in place of the serve rows score
        # past the tolerance. Both come from the policy's tolerances; (2) adapts to n, H and the rows.
        null = float("nan")  # all-zero serve rows: nothing to test (and the fit is inf, no fit)
        if np.isfinite(identity):
            drifted = _isotropic(factor * a.astype(np.float64), identity)
            null = rel_rms(span_predicted(a, drifted, fit)[0][held], drifted[held])
        params = {"method": "span", "hf_index": key[0], "scale": span.scale, "distance_from_identity": distance,
                  "span_rank": span.rank, "span_energy": energy, "identity_rel_rms": identity,
                  "drift_of_that_size_scores": null, "fit_rows": int(fit.sum())}
        out = scored(self, rows, predicted, b, params,
                     f"serve = train {rows.label(key)} rotated (tested on the span of {int(fit.sum())} fit rows, "
                     f"rank {span.rank}: distance from identity {distance:.2f}, scale {span.scale:.3g})")
        # (3) the map on the span is an isometry: a rotation sends the orthonormal train directions to
        # orthonormal images, while drift that is linear in the state (weight quantization: the error
        # of W x is dW x) fits the span as I + E, as far from orthogonal as from the identity. Measured
        # on an untrained 6-layer Llama (H = 128, span rank 12-15 of 112 fit rows): INT4 drift maps
        # 0.14-0.16 from identity and 0.10-0.12 from an isometry (and scored 0.067, "a rotation");
        # a planted rotation 1.03 from identity and 0.0005 from an isometry. Named only where the
        # defect is at most ISOMETRY_DEFECT of the distance.
        defect = span.isometry_defect()
        params["isometry_defect"] = defect
        if identity <= rows.drift_tolerance or null <= rows.tolerance or not defect <= ISOMETRY_DEFECT * distance:
            out.fits = False
            out.summary += ("; not named: the rows are within drift of the train rows" if identity <= rows.drift_tolerance
                            else "; not named: drift of that size would pass this test too" if null <= rows.tolerance
                            else f"; not named: the map is {defect:.2g} from an isometry, no rotation")
        return out


EXPLANATION = Rotation()


def span_predicted(a: np.ndarray, b: np.ndarray, fit: np.ndarray,
                   span: SpanMap | None = None) -> tuple[np.ndarray, float, SpanMap]:
    """The span test's predictions of every row (the held-out ones from the fit rows' map), the
    held-out serve energy inside the span, and the map."""
    span = SpanMap(a[fit], b[fit]) if span is None else span  # ``span``: the map of these fit rows, if made
    predicted = np.empty(b.shape, dtype=np.float64)
    predicted[fit], _ = span.predict(a[fit], b[fit])
    predicted[~fit], energy = span.predict(a[~fit], b[~fit])
    return predicted, energy, span


def _isotropic(x: np.ndarray, size: float) -> np.ndarray:
    """``x`` with seeded isotropic noise of rel-RMS ``size`` on every row (the null of the span test)."""
    noise = np.random.default_rng(0).standard_normal(x.shape)
    return x + size * np.linalg.norm(x, axis=1, keepdims=True) / np.sqrt(x.shape[1]) * noise
