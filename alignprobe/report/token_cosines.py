"""Per-token cosines of a compared stream, read back from the two dumps, for the histogram.

The result keeps 37 points of each slice's distribution (``SliceMetrics.cosine_cdf``), not every
token's cosine (that would grow with the dump); where the dumps are at hand the histogram re-reads
the aligned rows to count every token: the same pairing and the same cosine formula as the comparer
(``alignprobe.compare.pairing`` / ``metrics``), capped at ``max_tokens`` rows.
"""

from __future__ import annotations

import contextlib
import os

import numpy as np

from alignprobe.compare.kernels.numpy_kernels import token_terms
from alignprobe.compare.metrics import token_cosine
from alignprobe.compare.result import CompareResult, StreamComparison
from alignprobe.dump import Dump, open_dump
from alignprobe.errors import BadInput

MAX_TOKENS = 50_000  # enough for a smooth histogram; keeps a report of a large dump quick


def dumps_available(result: CompareResult) -> bool:
    return all(p and os.path.isfile(p) for p in (result.train_path, result.serve_path))


def token_cosines(
    result: CompareResult,
    pair: StreamComparison,
    train: Dump | None = None,
    serve: Dump | None = None,
    max_tokens: int = MAX_TOKENS,
) -> dict[str, np.ndarray]:
    """``{HF label: per-token cosine}`` for each compared slice of ``pair``."""
    from alignprobe.compare.pairing import pair_samples

    with contextlib.ExitStack() as stack:
        train = train or stack.enter_context(_open(result.train_path, "train"))
        serve = serve or stack.enter_context(_open(result.serve_path, "serve"))
        sample = result.options.get("sample")
        _, segments = pair_samples(train, serve, sample=sample if isinstance(sample, int) else None, max_tokens=max_tokens)
        out = {}
        for s in pair.slices:
            h_train = int(pair.train_claim["hidden_size"])
            h_serve = int(pair.serve_claim["hidden_size"])
            train_cols = slice(s.train_slice * h_train, (s.train_slice + 1) * h_train)
            serve_cols = slice(s.serve_slice * h_serve, (s.serve_slice + 1) * h_serve)
            parts = []
            for seg in segments:
                a = train.read(pair.train_stream, seg.train_row, seg.train_row + seg.length, train_cols)
                b = serve.read(pair.serve_stream, seg.serve_row, seg.serve_row + seg.length, serve_cols)
                finite = np.isfinite(a).all(axis=1) & np.isfinite(b).all(axis=1)
                parts.append(token_cosine(*token_terms(a[finite], b[finite])))
            out[s.label] = np.concatenate(parts) if parts else np.zeros(0)
        return out


def _open(path: str, side: str) -> Dump:
    if not path or not os.path.isfile(path):
        raise BadInput(
            f"the {side} dump {path!r} is not here: the per-token histogram re-reads both dumps "
            "(run the report where the dumps are, or use the other plots)"
        )
    return open_dump(path)
