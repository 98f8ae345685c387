"""Synthetic bfloat16 dumps for the benchmarks, fast to make on two cores.

Rows are drawn from a seeded pool of random vectors (so generating 8 GB does not cost minutes of
random numbers): HF index ``i`` takes other pool rows than index ``i+1``, so different indices are
near-orthogonal and the mapping search has one right answer. A serve dump pairs with its train dump
sample by sample (same ids and tokens); each of its slices is the train slice it claims plus noise
whose size varies from sample to sample, so sampled metrics differ from full ones by a real amount.
"""

from __future__ import annotations

import os
import time

import numpy as np
import torch

from alignprobe.conventions import eagle3_hf_indices
from alignprobe.dump import DumpWriter, Provenance, StreamClaim
from alignprobe.dump.encoding import to_storage
from alignprobe.dump.layout import create_file
from alignprobe.dump.schema import ROLE_DRAFTER_INPUT, ROLE_FINAL, ROLE_LAYERS

HIDDEN = 7168  # DeepSeek-V3 / Kimi-K2
LAYERS = 61
POOL_ROWS = 4093  # prime, so index offsets never line up with the pool size


class RowPool:
    def __init__(self, hidden: int, seed: int):
        self.rows = np.random.default_rng(seed).standard_normal((POOL_ROWS, hidden), dtype=np.float32)

    def take(self, picks: np.ndarray, hf_index: int) -> np.ndarray:
        return self.rows[(picks + 977 * hf_index) % POOL_ROWS] * np.float32(1 + 0.05 * hf_index)


def claims_for(streams: str, hidden: int = HIDDEN, layers: int = LAYERS) -> dict[str, StreamClaim]:
    """``drafter``: final (H) + eagle3_aux (3H); ``all``: those and ``layers`` (all N+1 indices)."""
    out = {
        "final": StreamClaim((layers,), hidden, layers, role=ROLE_FINAL),
        "eagle3_aux": StreamClaim(eagle3_hf_indices(layers), hidden, layers, role=ROLE_DRAFTER_INPUT),
    }
    if streams == "all":
        out["layers"] = StreamClaim(tuple(range(layers + 1)), hidden, layers, role=ROLE_LAYERS)
    return out


def sample_lengths(total_tokens: int, seed: int) -> np.ndarray:
    lengths = np.random.default_rng(seed).integers(200, 2000, size=total_tokens // 200 + 2)
    return lengths[: int(np.searchsorted(np.cumsum(lengths), total_tokens)) + 1]


def write_pair(train_path: str, serve_path: str, tokens: int, *, train_streams: str = "drafter",
               serve_streams: str = "drafter", noise: float = 0.05, seed: int = 0,
               block_tokens: int = 2048) -> dict:
    """A train dump and a serve dump of the same samples, written straight with the dump layout."""
    t0 = time.perf_counter()
    lengths = sample_lengths(tokens, seed)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    total = int(offsets[-1])
    ids = [f"sample-{i:06d}" for i in range(len(lengths))]
    rng = np.random.default_rng(seed + 1)
    token_ids = rng.integers(0, 32000, size=total)
    picks = rng.integers(0, POOL_ROWS, size=total)
    # noise amplitude per token: constant within a sample, 0.2x .. 1.8x across samples
    amplitude = np.repeat(rng.uniform(0.2, 1.8, size=len(lengths)), lengths).astype(np.float32)
    pool, noise_pool = RowPool(HIDDEN, seed), RowPool(HIDDEN, seed + 7)
    sides = ((train_path, claims_for(train_streams), False), (serve_path, claims_for(serve_streams), True))
    for path, claims, noisy in sides:
        prov = Provenance.here(engine="benchmark-serve" if noisy else "benchmark-train")
        with create_file(path + ".tmp", prov, claims, ids, offsets) as f:
            f["tokens"][:] = token_ids
            for name, claim in claims.items():
                ds = f[f"streams/{name}"]
                for s in range(0, total, block_tokens):
                    e = min(total, s + block_tokens)
                    parts = []
                    for hf in claim.hf_indices:
                        x = pool.take(picks[s:e], hf)
                        if noisy:
                            x = x + noise * amplitude[s:e, None] * noise_pool.take(picks[s:e], hf)
                        parts.append(x)
                    ds[s:e] = to_storage(np.concatenate(parts, axis=1), claim.dtype)
            f.attrs["complete"] = True
        os.replace(path + ".tmp", path)
    return {"tokens": total, "samples": len(lengths), "seconds": time.perf_counter() - t0,
            "train_gb": os.path.getsize(train_path) / 1e9, "serve_gb": os.path.getsize(serve_path) / 1e9}


def tokens_for(gigabytes: float, streams: str = "drafter") -> int:
    width = sum(c.width for c in claims_for(streams).values())
    return int(gigabytes * 1e9 / (2 * width))


def write_synthetic_dump(path: str, gigabytes: float, seed: int = 0) -> dict:
    """A bfloat16 dump of about ``gigabytes`` (streams of width H and 3H) written through DumpWriter."""
    claims = claims_for("drafter")
    lengths = sample_lengths(tokens_for(gigabytes), seed)
    pool = RowPool(HIDDEN, seed)
    rng = np.random.default_rng(seed + 1)
    t0 = time.perf_counter()
    with DumpWriter(path, Provenance.here(engine="benchmark"), claims, overwrite=True) as w:
        for i, n in enumerate(lengths):
            picks = rng.integers(0, POOL_ROWS, size=int(n))
            states = {
                name: torch.from_numpy(np.concatenate([pool.take(picks, hf) for hf in c.hf_indices], axis=1)).bfloat16()
                for name, c in claims.items()
            }
            w.add(f"sample-{i:06d}", rng.integers(0, 32000, size=int(n)), states)
    return {
        "path": path,
        "file_gb": os.path.getsize(path) / 1e9,
        "tokens": int(lengths.sum()),
        "samples": len(lengths),
        "widths": {k: c.width for k, c in claims.items()},
        "write_s": time.perf_counter() - t0,
    }
