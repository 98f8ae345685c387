"""A rotation tested on fewer rows than the width (a 7168-wide model, ~120 sampled rows).

Orthogonal Procrustes needs about 2H fit rows to pin an H x H rotation down. With n < H rows a
rotation is still testable, because it preserves every inner product: rows B are s * A @ Q for some
orthogonal Q exactly when B @ B.T = s^2 * A @ A.T. This tests that on held-out rows, as a rel-RMS in
serve units (so the policy's tolerance applies as to every other explanation):

- the fit rows pin Q down on their span: train direction v_k (a right singular vector of the fit rows)
  goes to B_fit.T @ u_k / sigma_k. A held-out row's component in that span is predicted from it
  (first-order evidence: a wrong map shows as an error of its own size);
- its component outside the span can go anywhere a rotation may send it: only the norms and the inner
  products of those components among the held-out rows are checked (the best orthogonal map between
  them, by Procrustes on the n_o held-out rows, whose minimum depends on their Gram matrices alone).

Only directions carrying at least an average fit row's energy (sigma_k^2 >= ||A_fit||^2 / n_fit) span
the map: through a direction of singular value sigma, drift of rel-RMS eps on the serve rows reaches
the prediction as eps * rms_row / sigma, so these directions pass no more drift than the rows carry.
"""

from __future__ import annotations

import numpy as np


def _residual_map(r: np.ndarray, s: np.ndarray, scale: float) -> np.ndarray:
    """scale * r @ Q for the orthogonal Q that brings it closest to s (rows outside the span)."""
    q1, k1 = np.linalg.qr(r.T)  # r = k1.T @ q1.T
    q2, k2 = np.linalg.qr(s.T)
    u, _, vt = np.linalg.svd(k1 @ k2.T)
    return scale * (k1.T @ (u @ vt) @ q2.T)


class SpanMap:
    """The map a rotation would have on the span of the fit rows ``a`` -> ``b``."""

    def __init__(self, a: np.ndarray, b: np.ndarray):
        a, b = a.astype(np.float64), b.astype(np.float64)
        u, sigma, vt = np.linalg.svd(a, full_matrices=False)
        keep = (sigma**2 >= np.sum(sigma**2) / max(1, len(a))) & (sigma > 0)
        self.directions = vt[keep]  # [k, H]: train directions
        self.images = (b.T @ u[:, keep] / sigma[keep]).T  # [k, H]: where the serve side has them (times scale)
        self.scale = float(np.linalg.norm(b) / max(1e-30, np.linalg.norm(a)))
        self.basis = np.linalg.qr(self.images.T)[0]  # [H, k]: orthonormal basis of the serve span

    @property
    def rank(self) -> int:
        return len(self.directions)

    def distance_from_identity(self) -> float:
        """||map - I|| on the span, over sqrt(2k): 0 for the identity, about 1 for a random rotation."""
        return float(np.linalg.norm(self.images / max(self.scale, 1e-30) - self.directions) / np.sqrt(2 * max(1, self.rank)))

    def isometry_defect(self) -> float:
        """How far the map is from an isometry on the span: ||G - I|| over sqrt(2k), G the Gram matrix of
        the images of the train directions (divided by the scale); 0 for any rotation."""
        images = self.images / max(self.scale, 1e-30)
        return float(np.linalg.norm(images @ images.T - np.eye(self.rank)) / np.sqrt(2 * max(1, self.rank)))

    def predict(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, float]:
        """The serve rows a rotation consistent with the fit rows comes closest to, for train rows ``a``
        (their span part predicted, the rest mapped as well as any rotation could: see the module
        docstring), and the fraction of b's energy that lies in the serve span."""
        a, b = a.astype(np.float64), b.astype(np.float64)
        coef = a @ self.directions.T
        inside = coef @ self.images
        b_inside = (b @ self.basis) @ self.basis.T
        outside = _residual_map(a - coef @ self.directions, b - b_inside, self.scale)
        energy = float(np.sum(b_inside**2) / max(1e-30, np.sum(b**2)))
        return inside + outside, energy
