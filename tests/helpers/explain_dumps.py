"""Every explanation of compare/explain/ planted in a serve dump, on a tiny briefly trained model.

The train dump is the shared scenario train dump (capture hf, bfloat16, batch size 4: every layer,
both finals, the aux concat). Each planted serve dump is derived from a second capture of the same
prompts at batch size 1 (so even the clean one differs from training by batching numerics), with
one fault whose parameters are known here, so the tests can check the fitted ones against them.
"""

from __future__ import annotations

import atexit
import copy
import dataclasses
import functools
import os
import shutil
import tempfile

import numpy as np

from alignprobe.conventions import eagle3_hf_indices
from alignprobe.dump import DumpWriter, Provenance, StreamClaim, open_dump
from scenario_dumps import HIDDEN, NUM_LAYERS, TRAIN_STEPS, scenario_paths

N, H = NUM_LAYERS, HIDDEN
AUX = eagle3_hf_indices(N)  # (2, 4, 5)
SPECFORGE_AUX = (2, 4, 5)  # SpecForge ids (1, 3, 4) = outputs of those layers = HF[2], HF[4], HF[5]
VLLM_READS = (1, 3, 4)  # ... the same ids read by vLLM as HF[k]
SCALE = float(np.sqrt(H))  # an embedding scaled by sqrt(H) on one side
SHIFT = 1  # serve row i is train row i+1
PAD_FRACTION = 0.25
SEED = 7
DEPTH_DRIFT = (0.03, 0.1, 0.15)  # rel-RMS planted per aux slice, growing with depth


def POSITION_DRIFT(position):  # rel-RMS planted at each position: 0.02 at the start, 0.2 at 90
    return 0.02 + 0.002 * position


def _rotation(seed: int = SEED) -> np.ndarray:
    q, r = np.linalg.qr(np.random.default_rng(seed).standard_normal((H, H)))
    return q * np.sign(np.diag(r))


def _channel_weight(seed: int = SEED) -> np.ndarray:
    # spread like a trained RMSNorm weight (a model trained for a few steps still has weights near 1)
    return np.exp(np.random.default_rng(seed).normal(0.0, 0.4, H))


ROTATION = _rotation()
WEIGHT = _channel_weight()


@dataclasses.dataclass
class Capture:
    ids: list[str]
    tokens: list[np.ndarray]
    hf: list[np.ndarray]  # per sample [S, N+1, H] float32
    pre: list[np.ndarray]  # per sample [S, H]: the pre-norm final state
    dtype: str


def _capture(model, prompts, folder: str, name: str, dtype: str = "bfloat16") -> Capture:
    from alignprobe.probes.hf import capture_hf

    path = capture_hf(copy.deepcopy(model), prompts, os.path.join(folder, f"{name}.h5"), batch_size=1, dtype=dtype,
                      progress=False)
    with open_dump(path) as d:
        ids = list(d.sample_ids)
        hf = [d.states(i, "layers").reshape(-1, N + 1, H) for i in range(len(ids))]
        pre = [d.states(i, "final_prenorm") for i in range(len(ids))]
        tokens = [d.token_ids(i) for i in range(len(ids))]
    return Capture(ids, tokens, hf, pre, dtype)


def _write(path: str, cap: Capture, streams: dict[str, StreamClaim], states, engine: str = "vllm", **prov) -> str:
    provenance = Provenance(engine=engine, dtype=cap.dtype, model="tiny", **prov)
    with DumpWriter(path, provenance, streams) as w:
        for i, sid in enumerate(cap.ids):
            w.add(sid, cap.tokens[i], states(i, cap))
    return path


def _aux_claim(indices=AUX, dtype="bfloat16") -> dict[str, StreamClaim]:
    return {"hidden_states": StreamClaim(tuple(indices), H, N, dtype, "post", "drafter_input", "planted")}


def _taps(indices, transform=lambda i, j, x: x):
    def states(i, cap):
        hf = cap.hf[i]
        return {"hidden_states": np.concatenate([transform(i, j, hf[:, k]) for j, k in enumerate(indices)], axis=1)}

    return states


@functools.lru_cache(maxsize=None)
def planted(arch: str) -> dict[str, str]:
    """name -> path: "train" (shared), "train3" (SpecForge-like, the drafter's 3 layers only), and the plants."""
    import torch

    from alignprobe.demo.scenarios import scenario_model, scenario_prompts

    paths = dict(train=scenario_paths(arch)["train"])
    out = tempfile.mkdtemp(prefix=f"alignprobe-explain-{arch}-")
    atexit.register(shutil.rmtree, out, True)
    model = scenario_model(arch, N, H, 0, TRAIN_STEPS)
    prompts = scenario_prompts(12, 1)
    cap = _capture(model, prompts, out, "serve")

    def add(name, streams, states, **kw):
        paths[name] = _write(os.path.join(out, f"{name}.h5"), cap, streams, states, **kw)

    add("clean", _aux_claim(), _taps(AUX))
    add("offset_minus1", _aux_claim(), _taps([i - 1 for i in AUX]))
    add("duplicate_tap", _aux_claim(), _taps((AUX[0], AUX[1], AUX[1])))
    add("missing_tap", _aux_claim(AUX[:2]), _taps(AUX[:2]))
    add("row_shift", _aux_claim(), _taps(AUX, lambda i, j, x: np.roll(x, -SHIFT, axis=0)))

    def previous_request(i, j, x):
        if i == 0:
            return x
        prev = cap.hf[i - 1][:, AUX[j]]
        y = x.copy()
        y[: len(prev)] = prev[: len(y)]
        return y

    add("foreign_previous", _aux_claim(), _taps(AUX, previous_request))
    with torch.no_grad():  # the pad token's states at every position: what a padded batch's tail rows hold
        pad = model(input_ids=torch.zeros(1, 128, dtype=torch.long), output_hidden_states=True).hidden_states
        pad = torch.stack(pad, dim=2)[0].to(torch.bfloat16).float().numpy()  # [128, N+1, H]

    def padding(i, j, x):
        y = x.copy()
        n = max(4, int(len(y) * PAD_FRACTION))
        y[-n:] = pad[len(y) - n : len(y), AUX[j]]
        return y

    add("padding_rows", _aux_claim(), _taps(AUX, padding))
    add("scalar_scale", _aux_claim(), _taps(AUX, lambda i, j, x: x * SCALE))
    add("channel_scale", _aux_claim(), _taps(AUX, lambda i, j, x: x * WEIGHT))
    add("rotation", _aux_claim(), _taps(AUX, lambda i, j, x: x @ ROTATION))
    add("rotation_last", _aux_claim(), _taps(AUX, lambda i, j, x: x @ ROTATION if j == 2 else x))

    def residual(i, j, x):
        return cap.hf[i][:, AUX[j]] - cap.hf[i][:, AUX[j] - 1] if j == 1 else x

    add("residual_split", _aux_claim(), _taps(AUX, residual))
    other = _capture(scenario_model(arch, N, H, 11, TRAIN_STEPS), prompts, out, "other-model")
    paths["nothing_fits"] = _write(os.path.join(out, "nothing_fits.h5"), other, _aux_claim(), _taps(AUX))
    # the speculators layout: 3 aux + the PRE-norm final, as vLLM's extract_hidden_states writes it
    spec = {"aux": StreamClaim(AUX, H, N, "bfloat16", "post", "drafter_input", "speculators hidden_states[:, :3]"),
            "final": StreamClaim((N,), H, N, "bfloat16", "pre", "final", "speculators hidden_states[:, 3]")}
    add("speculators", spec, lambda i, c: {"aux": c.hf[i][:, list(AUX)].reshape(len(c.hf[i]), -1), "final": c.pre[i]},
        engine="speculators")
    # SpecForge-trained (ids 1,3,4 = HF[2,4,5]) and served by vLLM with the same ids (HF[1,3,4])
    with open_dump(paths["train"]) as t:
        tcap = Capture(list(t.sample_ids), [t.token_ids(i) for i in range(t.num_samples)],
                       [t.states(i, "layers").reshape(-1, N + 1, H) for i in range(t.num_samples)], [], "bfloat16")
    paths["train3"] = _write(os.path.join(out, "train3.h5"), tcap,
                             {"aux_hidden_state": StreamClaim(SPECFORGE_AUX, H, N, "bfloat16", "post", "drafter_input",
                                                              "SpecForge ids 1,3,4")},
                             lambda i, c: {"aux_hidden_state": c.hf[i][:, list(SPECFORGE_AUX)].reshape(len(c.hf[i]), -1)},
                             engine="specforge")
    add("vllm_ids", _aux_claim(VLLM_READS), _taps(VLLM_READS))
    # numeric drift with a signature, planted as seeded noise (the tiny models barely use RoPE: a
    # RoPE base 1000x smaller moved their states by a rel-RMS of 0.008, so a real RoPE change plants
    # nothing measurable here): noise growing along the positions, and noise growing with depth
    rng = np.random.default_rng(SEED)

    def noise(x, size):
        return x + size[:, None] * np.linalg.norm(x, axis=1, keepdims=True) / np.sqrt(H) * rng.standard_normal(x.shape)

    add("position_drift", _aux_claim(), _taps(AUX, lambda i, j, x: noise(x, POSITION_DRIFT(np.arange(len(x))))))
    add("depth_drift", _aux_claim(), _taps(AUX, lambda i, j, x: noise(x, np.full(len(x), DEPTH_DRIFT[j]))))
    # a clean pair in another dtype: float16 serving against bfloat16 training
    half = _capture(model, prompts, out, "fp16", dtype="float16")
    paths["float16"] = _write(os.path.join(out, "float16.h5"), half, _aux_claim(dtype="float16"), _taps(AUX))
    paths["int4"] = scenario_paths(arch)["int4"]
    paths["nan_rows"] = scenario_paths(arch)["nan_rows"]
    copy_path = os.path.join(out, "train-copy.h5")
    shutil.copyfile(paths["train"], copy_path)
    paths["train_copy"] = copy_path
    return paths


@functools.lru_cache(maxsize=None)
def result(arch: str, name: str, train: str = "train"):
    from alignprobe.compare import compare

    p = planted(arch)
    return compare(p[train], p[name])
