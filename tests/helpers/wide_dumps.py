"""Planted rotations and per-channel scales on a WIDE tiny model: H = 1024, where the rows the
explanations read (compare/explaining.py's budget, ~600 at this width) are far fewer than the 2H an
H x H Procrustes needs, as on a 7168-wide model (~120 rows).

Train: capture hf (bfloat16, batch size 4, every layer). Serve: a second capture of the same prompts
at batch size 1 (its batching numerics differ from training's), the aux slices HF[1, 2, 3], with one
plant whose parameters are known here; plus a float16 capture (a clean pair in another dtype).
"""

from __future__ import annotations

import atexit
import copy
import functools
import os
import shutil
import tempfile

import numpy as np

from alignprobe.dump import DumpWriter, Provenance, StreamClaim, open_dump

H, N = 1024, 4
TAPS = (1, 2, 3)
SEED = 7
DRIFT = 0.12  # rel-RMS of isotropic noise: within explain_drift_rel_rms, past drift_fail_rel_rms
FAR = 0.3  # ... past explain_drift_rel_rms: no explanation, and no rotation either


def rotation(seed: int = SEED) -> np.ndarray:
    q, r = np.linalg.qr(np.random.default_rng(seed).standard_normal((H, H)))
    return q * np.sign(np.diag(r))


def channel_weight(seed: int = SEED) -> np.ndarray:
    return np.exp(np.random.default_rng(seed).normal(0.0, 0.4, H))  # spread like an RMSNorm weight


def _capture(model, prompts, path: str, batch_size: int, dtype: str, **kw):
    from alignprobe.probes.hf import capture_hf

    capture_hf(copy.deepcopy(model), prompts, path, batch_size=batch_size, dtype=dtype, progress=False, **kw)
    with open_dump(path) as d:
        return (list(d.sample_ids), [d.token_ids(i) for i in range(d.num_samples)],
                [d.states(i, "layers").reshape(-1, N + 1, H) for i in range(d.num_samples)])


def _write(path: str, capture, dtype: str, transform) -> str:
    ids, tokens, hf = capture
    claim = {"hidden_states": StreamClaim(TAPS, H, N, dtype, "post", "drafter_input", "planted")}
    with DumpWriter(path, Provenance(engine="vllm", dtype=dtype, model="tiny-wide"), claim) as w:
        for i, sid in enumerate(ids):
            w.add(sid, tokens[i], {"hidden_states": np.concatenate(
                [transform(j, hf[i][:, k]).astype(np.float32) for j, k in enumerate(TAPS)], axis=1)})
    return path


@functools.lru_cache(maxsize=None)
def wide_planted(arch: str) -> dict[str, str]:
    from alignprobe.demo.scenarios import scenario_prompts
    from alignprobe.demo.tiny_models import tiny_deepseek_v3, tiny_llama, train_briefly

    out = tempfile.mkdtemp(prefix=f"alignprobe-wide-{arch}-")
    atexit.register(shutil.rmtree, out, True)
    build = {"llama": tiny_llama, "deepseek_v3": tiny_deepseek_v3}[arch]
    model = train_briefly(build(num_layers=N, hidden_size=H, seed=0), steps=2, batch=4, length=32)  # a few steps: states that are not pure init
    prompts = scenario_prompts(12, 1)
    paths = {"train": os.path.join(out, "train.h5")}
    _capture(model, prompts, paths["train"], 4, "bfloat16", aux_layers=TAPS)  # the drafter trained on HF[1, 2, 3]
    serve = _capture(model, prompts, os.path.join(out, "serve-capture.h5"), 1, "bfloat16")
    half = _capture(model, prompts, os.path.join(out, "fp16-capture.h5"), 1, "float16")
    q, w, rng = rotation(), channel_weight(), np.random.default_rng(SEED)

    def noise(x, size):
        return x + size * np.linalg.norm(x, axis=1, keepdims=True) / np.sqrt(H) * rng.standard_normal(x.shape)

    plants = {
        "clean": (serve, "bfloat16", lambda j, x: x),
        "float16": (half, "float16", lambda j, x: x),
        "rotation": (serve, "bfloat16", lambda j, x: x @ q),
        "rotation_last": (serve, "bfloat16", lambda j, x: x @ q if j == 2 else x),
        "channel_scale": (serve, "bfloat16", lambda j, x: x * w),
        "drift": (serve, "bfloat16", lambda j, x: noise(x, DRIFT)),
        "far": (serve, "bfloat16", lambda j, x: noise(x, FAR)),
    }
    for name, (capture, dtype, transform) in plants.items():
        paths[name] = _write(os.path.join(out, f"{name}.h5"), capture, dtype, transform)
    return paths


@functools.lru_cache(maxsize=None)
def wide_result(arch: str, name: str):
    from alignprobe.compare import compare

    p = wide_planted(arch)
    return compare(p["train"], p[name])
