"""Diagnosis cases built apart from tests/helpers/explain_dumps.py, the way real engines fail, on models the
explanation tests never use: a Llama of 10 layers (H=96) and a DeepseekV3 (MLA + MoE) of 8, each
trained for 40 steps, so that deep neighbouring layers differ by LESS than the drift tolerance (a
measured rel-RMS of 0.05 between HF[6] and HF[5], under drift_fail 0.07): the regime of a real
model's middle layers, where "the same layer within tolerance" and "one layer off" must be told
apart by how exactly each fits. Every serve dump derives from a batch-size-1 capture (the train side
is batch size 4), so even the clean pair carries real batching noise. Each case's expected cause
comes from how it was built, never from the comparer.
"""

from __future__ import annotations

import atexit
import copy
import functools
import os
import shutil
import tempfile

import numpy as np

from alignprobe.conventions import eagle3_hf_indices
from alignprobe.dump import DumpWriter, Provenance, StreamClaim, open_dump

SHAPES = {"llama": (10, 96), "deepseek_v3": (8, 64)}  # (layers, hidden)
SEED = 11
TRAIN_STEPS = 40
ROPE_THETA = 500.0  # the serve side's RoPE base (the models' default is 10000)


def _models(arch: str):
    from alignprobe.demo.tiny_models import tiny_deepseek_v3, tiny_llama, train_briefly

    build = {"llama": tiny_llama, "deepseek_v3": tiny_deepseek_v3}[arch]
    n, h = SHAPES[arch]
    model = train_briefly(build(num_layers=n, hidden_size=h, seed=SEED), steps=TRAIN_STEPS, seed=SEED)
    other = train_briefly(build(num_layers=n, hidden_size=h, seed=SEED + 100), steps=TRAIN_STEPS, seed=SEED + 100)
    rope = build(num_layers=n, hidden_size=h, seed=SEED, rope_theta=ROPE_THETA)
    rope.load_state_dict(model.state_dict())
    return model, other, rope


def _states(path: str, n: int, h: int):
    with open_dump(path) as d:
        return ([str(s) for s in d.sample_ids], [d.token_ids(i).copy() for i in range(d.num_samples)],
                [d.states(i, "layers").reshape(-1, n + 1, h).copy() for i in range(d.num_samples)],
                [d.states(i, "final_prenorm").copy() for i in range(d.num_samples)])


@functools.lru_cache(maxsize=None)
def holdout_paths(arch: str) -> dict[str, str]:
    """name -> the serve dump of that case; "train" / "train32": capture hf at batch size 4 (bf16 / fp32)."""
    import torch

    from alignprobe.demo.scenarios import scenario_prompts
    from alignprobe.probes.hf import capture_hf
    from alignprobe.quant import simulate_weight_quant

    n, h = SHAPES[arch]
    aux = eagle3_hf_indices(n)
    out = tempfile.mkdtemp(prefix=f"alignprobe-holdout-{arch}-")
    atexit.register(shutil.rmtree, out, True)
    model, other, rope = _models(arch)
    prompts = scenario_prompts(num_samples=10, seed=SEED + 1, min_len=20, max_len=80)

    def capture(m, name, batch=1, dtype="bfloat16"):
        return capture_hf(copy.deepcopy(m), prompts, os.path.join(out, f"{name}.h5"), batch_size=batch, dtype=dtype,
                          progress=False)

    paths = {"train": capture(model, "train", 4), "train32": capture(model, "train32", 4, "float32")}
    scaled = copy.deepcopy(model)
    with torch.no_grad():  # an embedding multiplied by sqrt(H) on the serve side (a Gemma-style normalizer)
        scaled.get_input_embeddings().weight.mul_(float(np.sqrt(h)))
    sources = {"serve": model, "int4": simulate_weight_quant(copy.deepcopy(model), "int4", group_size=32),
               "embed": scaled, "other": other, "rope": rope}
    caps = {name: _states(capture(m, f"{name}-all"), n, h) for name, m in sources.items()}
    rng = np.random.default_rng(SEED)
    rotation, _ = np.linalg.qr(rng.standard_normal((h, h)))
    weight = np.exp(rng.normal(0.0, 0.3, h))

    def claim(indices=aux, norm="post", role="drafter_input"):
        return StreamClaim(tuple(indices), h, n, "bfloat16", norm, role, "holdout")

    def write(name, source, streams, states, engine="sglang"):
        ids, tokens, hf, pre = caps[source]
        path = os.path.join(out, f"{name}.h5")
        with DumpWriter(path, Provenance(engine=engine, dtype="bfloat16", model="tiny"), streams) as w:
            for i in range(len(ids)):
                w.add(ids[i], tokens[i], states(i, hf, pre))
        paths[name] = path

    def taps(indices, each=lambda j, x, i, hf: x):
        return lambda i, hf, pre: {"hidden_states": np.concatenate(
            [each(j, hf[i][:, k], i, hf) for j, k in enumerate(indices)], axis=1)}

    def from_sample(pick):
        """Rows of another sample (pick(i)), where it has them; the sample's own rows past its end (a
        stale buffer of the other request, overwritten only as far as it reached)."""
        def each(j, x, i, hf):
            other_rows = hf[pick(i, len(hf))][:, aux[j]]
            y = x.copy()
            m = min(len(y), len(other_rows))
            y[:m] = other_rows[:m]
            return y
        return each

    one = {"hidden_states": claim()}
    write("clean", "serve", one, taps(aux))
    write("final_only", "serve", {"hidden_states": claim((n,))}, lambda i, hf, pre: {"hidden_states": hf[i][:, n]})
    plus1 = tuple(k + 1 for k in aux)
    write("sglang_plus1", "serve", {"hidden_states": claim(plus1)}, taps(plus1))
    write("vllm_minus1", "serve", one, taps(tuple(k - 1 for k in aux)), engine="vllm")
    write("plus1_int4", "int4", {"hidden_states": claim(plus1)}, taps(plus1))
    write("row_shift", "serve", one, taps(aux, lambda j, x, i, hf: np.concatenate([x[1:], x[-1:]])))
    write("previous_request", "serve", one, taps(aux, from_sample(lambda i, count: (i - 1) % count)))
    write("pair_swap", "serve", one, taps(aux, from_sample(lambda i, count: i ^ 1 if (i ^ 1) < count else i)))

    with torch.no_grad():  # the pad token's states at every position: what a padded batch's tail rows hold
        pad = model(input_ids=torch.zeros(1, 96, dtype=torch.long), output_hidden_states=True).hidden_states
        pad = torch.stack(pad, dim=2)[0].to(torch.bfloat16).float().numpy()  # [96, N+1, H]

    def padding(j, x, i, hf):
        y = x.copy()
        k = max(4, len(y) // 4)  # a right-padded batch's tail rows, leaking into the answer
        y[-k:] = pad[len(y) - k : len(y), aux[j]]
        return y

    write("padding_rows", "serve", one, taps(aux, padding))
    write("embed_scaled", "embed", one, taps(aux))
    write("other_model", "other", one, taps(aux))
    write("rope_base", "rope", one, taps(aux))
    write("rotation", "serve", one, taps(aux, lambda j, x, i, hf: x @ rotation))
    write("rotation_last", "serve", one, taps(aux, lambda j, x, i, hf: x @ rotation if j == 2 else x))
    write("channel_scale", "serve", one, taps(aux, lambda j, x, i, hf: x * weight))
    write("scalar_sqrt_h", "serve", one, taps(aux, lambda j, x, i, hf: x * np.sqrt(h)))
    write("residual_split", "serve", one,
          taps(aux, lambda j, x, i, hf: x - hf[i][:, aux[j] - 1] if j == 1 else x))
    write("duplicate_tap", "serve", one, taps((aux[0], aux[1], aux[1])))

    def nan_rows(j, x, i, hf):
        y = x.copy()
        if i == 3:
            y[5:9] = np.nan
        return y

    write("nan_rows", "serve", one, taps(aux, nan_rows))
    write("vllm_correct", "serve", {"aux": claim(), "final": claim((n,), "pre", "final")},
          lambda i, hf, pre: {"aux": hf[i][:, list(aux)].reshape(len(hf[i]), -1), "final": pre[i]}, engine="vllm")
    return paths


@functools.lru_cache(maxsize=None)
def holdout_result(arch: str, name: str, train: str = "train", swapped: bool = False):
    from alignprobe.compare import compare

    p = holdout_paths(arch)
    return compare(p[name], p[train]) if swapped else compare(p[train], p[name])
