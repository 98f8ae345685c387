"""A third held-out set of diagnosis cases, built apart from tests/cases/holdout_cases.py and
tests/cases/holdout2_cases.py, with failure shapes neither of those covers (chunked prefill, prefix
caching, BOS or chat template on one side, the aux concat permuted or with a fourth slice, the final
norm on every aux slice, bf16 bits read as fp16, FP8 without a scale, a tensor-parallel gather in the
wrong rank order; the reports are cited in docs/findings.md, "Held-out cases"), on models, depths,
widths, seeds, prompt lengths and batch sizes no other test uses:

- ``llama``: a Llama of 7 layers, H = 96, trained 15 steps (seed 53), aux HF[2, 3, 4];
- ``deepseek_v3``: a DeepseekV3 (MLA + MoE, 8 experts, 2 a token) of 9 layers, H = 48, trained 8
  steps (seed 59), aux HF[2, 4, 6].

The train side is ``capture hf`` at batch size 4 (bfloat16); every serve dump derives from a second
capture of the same prompts at batch size 1 (or of other token ids: the BOS / template cases), written
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
from alignprobe.dump.marks import SampleMark

# name -> (builder, layers, hidden, seed, train steps, aux HF indices, prompts (count, seed, min, max))
MODELS = {
    "llama": ("llama", 7, 96, 53, 15, (2, 3, 4), (8, 61, 48, 130)),
    "deepseek_v3": ("deepseek_v3", 9, 48, 59, 8, (2, 4, 6), (7, 67, 44, 120)),
}
CHUNK = 32  # the serve engine's chunked-prefill size, in tokens
TP = 4  # tensor-parallel ranks whose channel blocks are gathered
BOS = 1  # the token id the train side's tokenizer puts first (the serve side's does not)
TEMPLATE = (3, 7, 11, 5, 9, 2, 13, 4, 6, 8, 10, 12)  # a chat template's header, train side only
TEMPLATE_END = (14, 15, 2)


def _model(name: str):
    from alignprobe.demo.tiny_models import tiny_deepseek_v3, tiny_llama, train_briefly

    arch, n, h, seed, steps, _, _ = MODELS[name]
    build = {"llama": tiny_llama, "deepseek_v3": tiny_deepseek_v3}[arch]
    return train_briefly(build(num_layers=n, hidden_size=h, seed=seed), steps=steps, batch=8, length=32, seed=seed)


def _read(path: str, n: int, h: int):
    with open_dump(path) as d:
        return ([str(s) for s in d.sample_ids], [d.token_ids(i).copy() for i in range(d.num_samples)],
                [d.states(i, "layers").reshape(-1, n + 1, h).copy() for i in range(d.num_samples)],
                [d.states(i, "final_prenorm").copy() for i in range(d.num_samples)])


def _bf16_bits_as_fp16(x: np.ndarray) -> np.ndarray:
    """``x`` rounded to bfloat16 and its 16 bits read as float16 (a capture that takes the engine's raw
    buffer for the dtype it expected)."""
    import torch

    return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).to(torch.bfloat16).view(torch.float16).float().numpy()


def _fp16_bits_as_bf16(x: np.ndarray) -> np.ndarray:
    import torch

    return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).to(torch.float16).view(torch.bfloat16).float().numpy()


def _fp8_no_scale(x: np.ndarray, scale: float = 1.0) -> np.ndarray:
    """``x * scale`` cast to float8_e4m3fn, saturating at +-448 (no per-tensor scale to fit the range),
    read back divided by ``scale``."""
    import torch

    y = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32) * scale).clamp(-448, 448)
    return (y.to(torch.float8_e4m3fn).float() / scale).numpy()


@functools.lru_cache(maxsize=None)
def holdout3_paths(name: str) -> dict[str, str]:
    """case -> its serve dump; "train" is capture hf (bfloat16, batch 4), "bos_train" / "template_train"
    the train side of the token cases (its own token ids)."""
    import torch

    from alignprobe.demo.scenarios import scenario_prompts
    from alignprobe.probes.hf import capture_hf
    from alignprobe.probes.prompts import Prompt

    arch, n, h, seed, _, aux, (count, prompt_seed, low, high) = MODELS[name]
    out = tempfile.mkdtemp(prefix=f"alignprobe-holdout3-{name}-")
    atexit.register(shutil.rmtree, out, True)
    model = _model(name)
    prompts = scenario_prompts(num_samples=count, seed=prompt_seed, min_len=low, max_len=high)
    model_name = f"tiny-{arch}"

    def capture(label, batch=1, dtype="bfloat16", these=prompts):
        return capture_hf(copy.deepcopy(model), these, os.path.join(out, f"{label}.h5"), batch_size=batch,
                          dtype=dtype, aux_layers=aux, progress=False, provenance={"model": model_name})

    paths = {"train": capture("train", 4)}
    serve = _read(capture("serve-all"), n, h)
    ids, tokens, hf, pre = serve
    rng = np.random.default_rng(seed)
    norm_weight = model.model.norm.weight.detach().float().numpy()
    eps = float(model.config.rms_norm_eps)

    def claim(indices=aux, norm="post", role="drafter_input", dtype="bfloat16"):
        return StreamClaim(tuple(indices), h, n, dtype, norm, role, "holdout3")

    def write(case, streams, states, engine="sglang", dtype="bfloat16", marks=None, token_ids=None):
        path = os.path.join(out, f"{case}.h5")
        with DumpWriter(path, Provenance(engine=engine, dtype=dtype, model=model_name), streams) as w:
            for i in range(len(ids)):
                toks = tokens[i] if token_ids is None else token_ids(i)
                w.add(ids[i], toks, states(i), mark=None if marks is None else marks(i))
        paths[case] = path

    def taps(indices=aux, each=lambda j, x, i: x):
        return lambda i: {"hidden_states": np.concatenate([each(j, hf[i][:, k], i) for j, k in enumerate(indices)],
                                                          axis=1)}

    one = {"hidden_states": claim()}
    write("clean_batch1", one, taps())

    # -- chunked prefill (IBM/vLLM-Hook #22; vLLM PR #52074) -----------------------------------------
    def last_chunk(i):  # the rows of the last chunk of the prompt: [start, len)
        length = len(tokens[i])
        return length - (length % CHUNK or CHUNK)
    # a capture that knows where the rows it got belong: the last chunk's, NaN before, marked short
    write("chunk_last_marked", one,
          lambda i: {"hidden_states": np.where(np.arange(len(tokens[i]))[:, None] >= last_chunk(i),
                                               taps()(i)["hidden_states"], np.nan)},
          marks=lambda i: SampleMark(len(tokens[i]), (last_chunk(i), len(tokens[i]))))
    # a capture that pairs the rows it got with the prompt's first tokens (rows displaced by the chunks before)
    def chunk_at_start(i):
        return taps()(i)["hidden_states"][last_chunk(i):]
    write("chunk_last_at_start", one, lambda i: {"hidden_states": chunk_at_start(i)},
          token_ids=lambda i: tokens[i][: len(tokens[i]) - last_chunk(i)])
    # chunks stitched in reverse order (slime #1871: an all-gather across ranks scrambling token order)
    def chunks_reversed(i):
        x = taps()(i)["hidden_states"]
        blocks = [x[s:s + CHUNK] for s in range(0, len(x), CHUNK)]
        return np.concatenate(blocks[::-1]) if len(blocks) > 1 else x
    write("chunks_reversed", one, lambda i: {"hidden_states": chunks_reversed(i)})

    # -- prefix caching (vLLM #44485; SGLang PR #30177) -----------------------------------------------
    # every request after the first hits a cached prefix of one chunk: those rows are never computed,
    # the capture leaves the buffer's zeros there, or the previous request's rows (a stale buffer)
    def prefix_rows(i, stale):
        x = taps()(i)["hidden_states"].copy()
        if i:
            x[:CHUNK] = taps()(i - 1)["hidden_states"][:CHUNK] if stale else 0.0
        return x
    write("prefix_zeros", one, lambda i: {"hidden_states": prefix_rows(i, False)})
    write("prefix_stale", one, lambda i: {"hidden_states": prefix_rows(i, True)})

    # -- tokens on one side only: BOS, a chat template (states of their own token ids) ----------------
    bos_prompts = [Prompt(p.sample_id, [BOS] + list(p.token_ids)) for p in prompts]
    paths["bos_train"] = capture("bos-train", 4, these=bos_prompts)
    tpl_prompts = [Prompt(p.sample_id, list(TEMPLATE) + list(p.token_ids) + list(TEMPLATE_END)) for p in prompts]
    paths["template_train"] = capture("template-train", 4, these=tpl_prompts)
    write("no_bos", one, taps())  # the serve side: the prompts as they are
    write("no_template", one, taps())

    # -- the aux concat --------------------------------------------------------------------------------
    permuted = (aux[2], aux[0], aux[1])  # the three slices in another order, claims as configured
    write("aux_permuted", one, taps(permuted))
    four = {"hidden_states": claim(aux + (n,), "pre")}
    write("final_as_fourth_slice", four,
          lambda i: {"hidden_states": np.concatenate([taps()(i)["hidden_states"], pre[i]], axis=1)}, engine="vllm")

    def final_norm(j, x, i):  # the model's final RMSNorm applied to every aux state
        return x / np.sqrt(np.mean(x * x, axis=1, keepdims=True) + eps) * norm_weight
    write("final_norm_on_aux", one, taps(each=final_norm))

    # -- numbers -------------------------------------------------------------------------------------
    write("bf16_bits_as_fp16", {"hidden_states": claim(dtype="float16")},
          lambda i: {"hidden_states": _bf16_bits_as_fp16(taps()(i)["hidden_states"])}, dtype="float16")
    # ... and float16 bits read as bfloat16 (an engine run in float16, its buffer taken as bfloat16)
    write("fp16_bits_as_bf16", one, lambda i: {"hidden_states": _fp16_bits_as_bf16(taps()(i)["hidden_states"])})
    write("fp8_no_scale", one, lambda i: {"hidden_states": _fp8_no_scale(taps()(i)["hidden_states"])})
    # a per-tensor scale calibrated on the first request's shallowest slice, applied to every slice: the
    # deeper slices' larger values saturate at 448
    first = hf[0][:, aux[0]]
    calib = 448.0 / float(np.quantile(np.abs(first), 0.99))
    write("fp8_saturated", one, lambda i: {"hidden_states": _fp8_no_scale(taps()(i)["hidden_states"], calib)})

    # -- tensor parallel: each rank's channel block gathered in the wrong rank order ------------------
    order = np.concatenate([np.arange(r * (h // TP), (r + 1) * (h // TP)) for r in (1, 0, 3, 2)])
    write("tp_gather_order", one, taps(each=lambda j, x, i: x[:, order]))
    del rng, torch
    return paths


@functools.lru_cache(maxsize=None)
def holdout3_result(name: str, case: str, train: str = "train"):
    from alignprobe.compare import compare

    p = holdout3_paths(name)
    return compare(p[train], p[case])
