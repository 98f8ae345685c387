"""A second held-out set of diagnosis cases, built apart from tests/cases/holdout_cases.py and
tests/helpers/explain_dumps.py, from the failure shapes of public engine reports (SGLang, vLLM, SpecForge,
speculators threads; listed in docs/findings.md, "Held-out cases"), on other models, seeds, depths,
widths, prompt lengths and batch sizes than any other test uses:

- ``llama``: a Llama of 12 layers, H = 64, trained 12 steps (seed 31): deep neighbouring layers alike
  (measured rel-RMS of HF[k+1] against HF[k]: 0.085 at k = 8, 0.053 at k = 10, under drift_fail 0.07);
- ``deepseek_v3``: a DeepseekV3 (MLA + MoE, 8 experts, 2 a token) of 7 layers, H = 64, trained 10
  steps (seed 41): expert routing can flip between two captures (neighbours 0.33-0.48 apart);
- ``llama_raw``: an untrained Llama of 6 layers, H = 128 (seed 37), whose default EAGLE-3 ids repeat
  (2, 3, 3), so its drafter is given HF[1, 3, 4]; fewer rows than 2H, so rotations are tested on the
  span (explain/span_rotation.py). It gets only the serve and INT4 captures.

The train side is ``capture hf`` at batch size 3 (bfloat16; float32 for one clean pair); every serve
dump derives from a second capture of the same prompts at batch size 2 (or 1, or in float16), written
as the engine would hand it over, with the fault applied the way that engine fails. Each case's
expected cause comes from how it was built, never from the comparer.
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

# name -> (builder, layers, hidden, seed, train steps, aux HF indices, prompts (count, seed, min, max))
MODELS = {
    "llama": ("llama", 12, 64, 31, 12, (2, 6, 9), (9, 3, 14, 56)),
    "deepseek_v3": ("deepseek_v3", 7, 64, 41, 10, (2, 3, 4), (8, 5, 30, 90)),
    "llama_raw": ("llama", 6, 128, 37, 0, (1, 3, 4), (7, 9, 16, 48)),
}
# the serve captures the untrained model is given (the rest of its cases need none of the others)
FEW_SOURCES = {"llama_raw": ("serve", "int4")}
ROPE_SCALING = {"rope_type": "linear", "factor": 2.0}  # the serve side's RoPE scaling (the train side has none)


def _model(name: str, seed_offset: int = 0, **overrides):
    from alignprobe.demo.tiny_models import tiny_deepseek_v3, tiny_llama, train_briefly

    arch, n, h, seed, steps, _, _ = MODELS[name]
    build = {"llama": tiny_llama, "deepseek_v3": tiny_deepseek_v3}[arch]
    model = build(num_layers=n, hidden_size=h, seed=seed + seed_offset, **overrides)
    return train_briefly(model, steps=steps, batch=8, length=32, seed=seed + seed_offset) if steps else model


def _read(path: str, n: int, h: int):
    with open_dump(path) as d:
        return ([str(s) for s in d.sample_ids], [d.token_ids(i).copy() for i in range(d.num_samples)],
                [d.states(i, "layers").reshape(-1, n + 1, h).copy() for i in range(d.num_samples)],
                [d.states(i, "final_prenorm").copy() for i in range(d.num_samples)])


@functools.lru_cache(maxsize=None)
def holdout2_paths(name: str) -> dict[str, str]:
    """case -> its serve dump; "train" (bf16, batch 3), "train32" (fp32), "specforge_train" (the drafter's
    three layers and the post-norm final only, as SpecForge writes them)."""
    import torch

    from alignprobe.demo.scenarios import scenario_prompts
    from alignprobe.probes.hf import capture_hf
    from alignprobe.quant import simulate_weight_quant

    arch, n, h, seed, _, aux, (count, prompt_seed, low, high) = MODELS[name]
    out = tempfile.mkdtemp(prefix=f"alignprobe-holdout2-{name}-")
    atexit.register(shutil.rmtree, out, True)
    model = _model(name)
    prompts = scenario_prompts(num_samples=count, seed=prompt_seed, min_len=low, max_len=high)
    model_name = f"tiny-{arch}"

    def capture(m, label, batch=2, dtype="bfloat16"):
        return capture_hf(copy.deepcopy(m), prompts, os.path.join(out, f"{label}.h5"), batch_size=batch, dtype=dtype,
                          aux_layers=aux, progress=False, provenance={"model": model_name})

    few = FEW_SOURCES.get(name)
    paths = {"train": capture(model, "train", 3)}
    sources = {"serve": lambda: (model, 2, "bfloat16"), "half": lambda: (model, 2, "float16"),
               "int8": lambda: (simulate_weight_quant(copy.deepcopy(model), "int8", group_size=32), 2, "bfloat16"),
               "int4": lambda: (simulate_weight_quant(copy.deepcopy(model), "int4", group_size=32), 2, "bfloat16"),
               "fp8": lambda: (simulate_weight_quant(copy.deepcopy(model), "fp8"), 2, "bfloat16"),
               "rope": lambda: (_with_weights(_model(name, rope_scaling=ROPE_SCALING), model), 2, "bfloat16")}
    sources = {label: make() for label, make in sources.items() if few is None or label in few}
    if few is None:
        paths["train32"] = capture(model, "train32", 3, "float32")
    quant = {"int8": "int8-w8a16-g32", "int4": "int4-w4a16-g32", "fp8": "fp8-e4m3"}
    caps = {label: _read(capture(m, f"{label}-all", batch, dtype), n, h) for label, (m, batch, dtype) in sources.items()}
    rng = np.random.default_rng(seed)
    rotation, _ = np.linalg.qr(rng.standard_normal((h, h)))
    fc_norm_weight = np.exp(rng.normal(0.0, 0.25, h))  # an RMSNorm weight, as a trained fc_norm's

    def claim(indices=aux, norm="post", role="drafter_input", dtype="bfloat16"):
        return StreamClaim(tuple(indices), h, n, dtype, norm, role, "holdout2")

    def write(case, source, streams, states, engine="sglang", path_dir=out):
        if source not in caps:
            return  # a case of a source this model is not given
        ids, tokens, hf, pre = caps[source]
        dtype = sources[source][2]
        path = os.path.join(path_dir, f"{case}.h5")
        prov = Provenance(engine=engine, dtype=dtype, model=model_name, quantization=quant.get(source, ""))
        with DumpWriter(path, prov, {k: dataclass_with_dtype(c, dtype) for k, c in streams.items()}) as w:
            for i in range(len(ids)):
                w.add(ids[i], tokens[i], states(i, hf, pre))
        paths[case] = path

    def taps(indices, each=lambda j, x, i, hf: x):
        return lambda i, hf, pre: {"hidden_states": np.concatenate(
            [each(j, hf[i][:, k], i, hf) for j, k in enumerate(indices)], axis=1)}

    one = {"hidden_states": claim()}
    plus1, minus1 = tuple(k + 1 for k in aux), tuple(k - 1 for k in aux)
    # clean pairs: another batch size, another dtype on either side
    write("clean_batch2", "serve", one, taps(aux))
    write("clean_fp16", "half", one, taps(aux))
    # speculators / vLLM extract_hidden_states: 3 aux + the pre-norm final, ids [.., N]
    spec = {"aux": claim(), "final": claim((n,), "pre", "final")}
    write("speculators_correct", "serve", spec,
          lambda i, hf, pre: {"aux": hf[i][:, list(aux)].reshape(len(hf[i]), -1), "final": pre[i]}, engine="speculators")
    # ... with the last id N-1 where N was meant (the final slot one layer early)
    write("speculators_final_early", "serve", spec,
          lambda i, hf, pre: {"aux": hf[i][:, list(aux)].reshape(len(hf[i]), -1), "final": hf[i][:, n - 1]},
          engine="speculators")
    # offsets: SGLang's +1 on explicit ids (claims as configured, i.e. the drafter's), vLLM's -1 of
    # SpecForge ids (honest claims), each with and without weight-quantization drift
    write("sglang_plus1_claims_configured", "serve", one, taps(plus1))
    write("vllm_minus1", "serve", {"hidden_states": claim(minus1)}, taps(minus1), engine="vllm")
    write("vllm_minus1_int8", "int8", {"hidden_states": claim(minus1)}, taps(minus1), engine="vllm")
    write("sglang_plus1_fp8", "fp8", {"hidden_states": claim(plus1)}, taps(plus1))
    # EAGLE instead of EAGLE3: the post-norm final only (SGLang), and from an INT4 server (vLLM)
    final_only = {"hidden_states": claim((n,))}
    write("eagle_not_eagle3", "serve", final_only, lambda i, hf, pre: {"hidden_states": hf[i][:, n]})
    write("eagle_not_eagle3_int4_vllm", "int4", final_only, lambda i, hf, pre: {"hidden_states": hf[i][:, n]},
          engine="vllm")
    # three ids where one slot repeats (a clamped id): the first slot written twice
    write("repeated_first_slot", "serve", one, taps((aux[0], aux[0], aux[2])))
    # fc_norm-style per-aux RMSNorm applied on the serve side to the first and last slices only
    def fc_norm(j, x, i, hf):
        if j == 1:
            return x
        return x / np.sqrt(np.mean(x * x, axis=1, keepdims=True) + 1e-6) * fc_norm_weight
    write("rmsnorm_some_slices", "serve", one, taps(aux, fc_norm))
    write("rotation_middle", "serve", one, taps(aux, lambda j, x, i, hf: x @ rotation if j == 1 else x))
    write("row_shift_minus2", "serve", one,  # serve row i is train row i-2 (a stale offset of two)
          taps(aux, lambda j, x, i, hf: np.concatenate([x[:2], x[:-2]])))

    def permuted(j, x, i, hf):  # batches of 3 requests, their rows rotated inside the batch
        start = i - i % 3
        size = min(3, len(hf) - start)
        other = hf[start + (i - start + 1) % size][:, aux[j]]
        y = x.copy()
        m = min(len(y), len(other))
        y[:m] = other[:m]
        return y
    write("batch_rows_rotated", "serve", one, taps(aux, permuted))

    def offset_leak(j, x, i, hf):
        """SGLang #32089-style: a batch of 2 flattened into one buffer; the second request reads from
        the first request's start (the offset was not advanced), so it gets the first request's rows
        and, past their end, its own first rows."""
        if i % 2 == 0 or i == 0:
            return x
        flat = np.concatenate([hf[i - 1][:, aux[j]], x])
        return flat[: len(x)]
    write("offset_not_advanced", "serve", one, taps(aux, offset_leak))
    write("residual_split_last", "serve", one,
          taps(aux, lambda j, x, i, hf: x - hf[i][:, aux[j] - 1] if j == 2 else x))
    write("rope_scaling", "rope", one, taps(aux))
    write("fp8_weights", "fp8", one, taps(aux))
    write("int4_weights", "int4", one, taps(aux))
    # the same dump under another name: a copy, provenance and all
    shutil.copyfile(paths["train"], os.path.join(out, "train-copy.h5"))
    paths["train_copy"] = os.path.join(out, "train-copy.h5")
    # a SpecForge-style train set: the drafter's three layers and the post-norm final, nothing else
    ids, tokens, hf, pre = caps["serve"]
    sf = os.path.join(out, "specforge-train.h5")
    with DumpWriter(sf, Provenance(engine="specforge", dtype="bfloat16", model=model_name),
                    {"aux_hidden_state": claim(), "hidden_state": claim((n,), "post", "final")}) as w:
        tr_ids, tr_tokens, tr_hf, _ = _read(paths["train"], n, h)
        for i in range(len(tr_ids)):
            w.add(tr_ids[i], tr_tokens[i], {"aux_hidden_state": tr_hf[i][:, list(aux)].reshape(len(tr_hf[i]), -1),
                                            "hidden_state": tr_hf[i][:, n]})
    paths["specforge_train"] = sf
    # the SpecForge drafter's ids served by vLLM unchanged: one layer early, honest vLLM claims
    write("specforge_ids_on_vllm", "serve", {"hidden_states": claim(minus1)}, taps(minus1), engine="vllm")
    return paths


def _with_weights(model, source):
    model.load_state_dict(source.state_dict())
    return model


def dataclass_with_dtype(c: StreamClaim, dtype: str) -> StreamClaim:
    import dataclasses

    return dataclasses.replace(c, dtype=dtype)


@functools.lru_cache(maxsize=None)
def holdout2_result(name: str, case: str, train: str = "train", swapped: bool = False):
    from alignprobe.compare import compare

    p = holdout2_paths(name)
    return compare(p[case], p[train]) if swapped else compare(p[train], p[case])
