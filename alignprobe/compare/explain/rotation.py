"""An orthogonal transform: the serve slice is the expected train slice rotated (QuaRot / SpinQuant
style rotations folded into the weights on one side), times a scale. Fitted by orthogonal
Procrustes (with scale) on the fit rows, scored on the held-out rows: a rotation has H(H-1)/2
parameters, so it needs at least 2H fit rows to mean anything, and is not tried on fewer."""

from __future__ import annotations

import numpy as np

from alignprobe.compare.explain.base import ExplainRows, scored
from alignprobe.compare.result import ExplanationFit


class Rotation:
    name = "rotation"
    complexity = 7

    def fit(self, rows: ExplainRows, j: int) -> ExplanationFit | None:
        key = rows.expected[j]
        if key is None or key not in rows.train:
            return None
        a, b = rows.train[key], rows.serve[:, j]
        hidden = a.shape[1]
        if rows.fit.sum() < 2 * hidden:
            return None
        fa, fb = a[rows.fit], b[rows.fit]
        u, s, vt = np.linalg.svd(fa.T @ fb)
        rotation = u @ vt
        scale = float(s.sum() / max(1e-30, np.sum(fa * fa)))
        distance = float(np.linalg.norm(rotation - np.eye(hidden)) / np.sqrt(2 * hidden))
        params = {"hf_index": key[0], "scale": scale, "distance_from_identity": distance,
                  "determinant_sign": int(np.sign(np.linalg.det(rotation))), "fit_rows": int(rows.fit.sum())}
        return scored(self.name, self.complexity, rows, scale * (a @ rotation), b, params,
                      f"serve = train {rows.label(key)} rotated by an orthogonal {hidden}x{hidden} matrix "
                      f"(distance from identity {distance:.2f}, scale {scale:.3g})")
