"""Small synthetic dumps for comparer tests: a random-walk 'model' whose layers are told apart easily.

``hf[k]`` (k = 0..N) is a running sum of Gaussian steps, so neighbouring layers are similar but
distinct; ``pre`` is the last layer's output before the final norm and ``hf[N]`` is its RMS-normed
form times a norm weight. Everything is float32, seeded, and quick.
"""

from __future__ import annotations

import numpy as np

from alignprobe.dump import DumpWriter, Provenance, StreamClaim

N = 6
H = 16
AUX = (2, 3, 4)


def make_samples(num=6, length=40, seed=0, norm_weight=None, lengths=None):
    """{sample_id: (token_ids [S], hf [S, N+1, H], prenorm [S, H])}"""
    g = np.random.default_rng(seed)
    w = np.asarray(norm_weight if norm_weight is not None else 1.0 + 0.3 * g.standard_normal(H), dtype=np.float32)
    out = {}
    for i in range(num):
        n = lengths[i] if lengths is not None else length
        steps = g.standard_normal((n, N + 1, H)).astype(np.float32)
        walk = np.cumsum(steps, axis=1)
        pre = walk[:, N].copy()
        hf = walk.copy()
        hf[:, N] = pre / np.sqrt((pre**2).mean(1, keepdims=True)) * w
        ids = g.integers(0, 500, n)
        out[f"s{i:02d}"] = (ids, hf, pre)
    return out


def train_streams(dtype="float32"):
    return {
        "layers": StreamClaim(range(N + 1), H, N, dtype, "post", "layers"),
        "final_prenorm": StreamClaim((N,), H, N, dtype, "pre", "layers"),
        "eagle3_aux": StreamClaim(AUX, H, N, dtype, "post", "drafter_input"),
        "final": StreamClaim((N,), H, N, dtype, "post", "final"),
    }


def train_states(hf, pre):
    s = len(hf)
    return {
        "layers": hf.reshape(s, -1),
        "final_prenorm": pre,
        "eagle3_aux": hf[:, list(AUX)].reshape(s, -1),
        "final": hf[:, N],
    }


def write_dump(path, samples, streams, states_fn, provenance=None, ids_fn=None, skip=()):
    """Write ``samples`` with ``states_fn(hf, pre, sample_id) -> {stream: [S, width]}``."""
    with DumpWriter(path, provenance or Provenance.here(engine="test", dtype="float32"), streams) as w:
        for sid, (ids, hf, pre) in samples.items():
            if sid in skip:
                continue
            states = states_fn(hf, pre, sid)
            token_ids = ids_fn(ids, sid) if ids_fn else ids
            w.add(sid, token_ids, states)
    return str(path)


def write_train(path, samples, **kw):
    return write_dump(path, samples, train_streams(), lambda hf, pre, sid: train_states(hf, pre), **kw)


def aux_claim(indices=AUX, width_slices=None, role="drafter_input", final_norm="post", hidden=H):
    return StreamClaim(tuple(indices), hidden, N, "float32", final_norm, role)


def write_serve(path, samples, taps=AUX, claim=None, transform=None, **kw):
    """A one-stream SGLang-like serve dump: the concat of HF ``taps`` (optionally transformed)."""
    claim = claim or aux_claim(taps)

    def states(hf, pre, sid):
        x = hf[:, list(taps)].reshape(len(hf), -1).copy()
        return {"hidden_states": transform(x, sid) if transform else x}

    return write_dump(path, samples, {"hidden_states": claim}, states, **kw)


def awkward_rows(seed=0, H=64):
    """Random rows plus one of each kind the health counts and the overflow fallback must catch."""
    g = np.random.default_rng(seed)
    a = g.standard_normal((12, H)).astype(np.float32)
    b = (a + 0.05 * g.standard_normal((12, H))).astype(np.float32)
    a[1, 5] = np.nan
    b[2, 7] = np.inf
    a[3] = 0.0
    b[4] = 0.25  # constant
    a[5] *= 3e19  # float32 squares overflow: redone in float64 by the numpy kernels
    b[5] *= 3e19
    b[6, [0, 1, H // 2, H - 1]] = 1.5  # passes the constant screen, is not constant
    return a, b
