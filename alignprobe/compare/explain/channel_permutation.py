"""Channel blocks in another order: the serve slice is the expected train slice with its H channels cut
into ``t`` equal blocks and the blocks permuted (a tensor-parallel all-gather that concatenates the
ranks' shards in another order than their rank: slime #1871's all-gather reshuffle, vllm-ascend
PR #8433's rank offsets).

A permutation of channels is orthogonal, so ``rotation`` fits it exactly too, but its fix (QuaRot /
SpinQuant weights on one side) sends a team the wrong way; this one is simpler (a few discrete
parameters: the order of ``t`` blocks) and says which blocks went where. The order is chosen on the
fit rows (each serve block against every train block) and scored on the held-out rows.
"""

from __future__ import annotations

import numpy as np

from alignprobe.compare.explain.base import ExplainRows, FromExpected, Key, rel_rms, scored
from alignprobe.compare.result import ExplanationFit

# tensor-parallel sizes tried (a block is H / t channels); the smallest that fits is named, since a
# larger t can express a smaller one's order
BLOCK_COUNTS = (2, 4, 8, 16, 32, 64)
MIN_BLOCK = 4  # channels a block, at least: a finer "permutation" is a shuffle no gather makes


class ChannelPermutation(FromExpected):
    name = "channel_permutation"
    complexity = 5
    code = "channels_permuted"
    transform = True
    tried_where_identity_fits = False
    fix = ("The serve state's channels are the training ones in blocks of H/t, in another order: a "
           "tensor-parallel all-gather concatenated the ranks' shards out of rank order (the evidence gives "
           'which train block each serve block is). Gather the shards in rank order (or capture with tensor '
           'parallelism 1 to confirm).')

    def fit_pair(self, rows: ExplainRows, j: int, key: Key, a: np.ndarray, b: np.ndarray) -> ExplanationFit | None:
        hidden = a.shape[1]
        fa, fb = a[rows.fit].astype(np.float64), b[rows.fit].astype(np.float64)
        best = None
        for t in (t for t in BLOCK_COUNTS if hidden % t == 0 and hidden // t >= MIN_BLOCK):
            order = _block_order(fa, fb, t)
            if order is None or np.array_equal(order, np.arange(t)):
                continue  # not a permutation, or no move at all (identity says that)
            columns = _columns(order, hidden // t)
            error = rel_rms(fa[:, columns], fb)
            if best is None or error < best[0] * 0.999:  # the smaller t, unless a larger one fits better
                best = (error, t, order, columns)
            if error <= rows.tolerance:
                break
        if best is None:
            return None
        _, t, order, columns = best
        params = {"blocks": t, "block_width": hidden // t, "order": [int(k) for k in order], "hf_index": key[0]}
        return scored(self, rows, a[:, columns], b, params,
                      f"serve = train {rows.label(key)} with its channels in {t} blocks of {hidden // t}, gathered in "
                      f"the order {[int(k) for k in order]} (serve block i is train block order[i])")


EXPLANATION = ChannelPermutation()


def _block_order(fa: np.ndarray, fb: np.ndarray, t: int) -> np.ndarray | None:
    """For each serve block, the train block it is closest to on the fit rows; None unless that is a
    permutation (two serve blocks from one train block is no gather order)."""
    ra, rb = fa.reshape(len(fa), t, -1), fb.reshape(len(fb), t, -1)
    na, nb = np.einsum("rkw,rkw->k", ra, ra), np.einsum("riw,riw->i", rb, rb)
    cost = nb[:, None] + na[None, :] - 2 * np.einsum("riw,rkw->ik", rb, ra)
    order = np.argmin(cost, axis=1)
    return order if len(np.unique(order)) == t else None


def _columns(order: np.ndarray, width: int) -> np.ndarray:
    return (order[:, None] * width + np.arange(width)[None, :]).reshape(-1)
