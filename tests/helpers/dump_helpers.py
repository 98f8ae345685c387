"""Small dumps written with known contents, for tests of the format itself."""

from __future__ import annotations

import numpy as np
import torch

from alignprobe.dump import DumpWriter, Provenance, StreamClaim

H = 16
N = 6


def random_samples(lengths, widths, dtype=torch.bfloat16, seed=0):
    """{sample_id: (token_ids, {stream: states})} with the given lengths and stream widths."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    for i, n in enumerate(lengths):
        ids = torch.randint(0, 1000, (n,), generator=g)
        out[f"prompt-{i}"] = (ids, {name: torch.randn(n, w, generator=g).to(dtype) for name, w in widths.items()})
    return out


def write(path, samples, streams, **writer_options):
    with DumpWriter(path, Provenance.here(engine="test", model="tiny"), streams, **writer_options) as w:
        for sid, (ids, states) in samples.items():
            w.add(sid, ids, states)
    return path


def claims(dtype="bfloat16"):
    return {
        "aux": StreamClaim((2, 3, 4), H, N, dtype),
        "final": StreamClaim((N,), H, N, dtype, role="final"),
    }


def sha(path):
    import hashlib

    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def as_f32(t: torch.Tensor) -> np.ndarray:
    return t.float().numpy()
