"""A fourth held-out set of diagnosis cases, built apart from tests/holdout*_cases.py, with failure
shapes none of those covers (serve rows past the prompt: decode steps, a rejected draft token; another
revision or a fine-tune of the target; a pruned model; an embedding multiplier; L2-normalised or
LayerNorm-centred rows; fp16 overflow; an FP8 KV cache; sliding-window attention on one side; a missing
tensor-parallel all-reduce; the reports are cited in docs/findings.md, "Fourth held-out set"), on an
architecture no other test uses and a depth, width and seed of DeepseekV3 none uses:

- ``qwen3``: a Qwen3 (q/k norms, head_dim 16) of 6 layers, H = 64, trained 12 steps (seed 71), aux HF[1, 3, 4];
- ``deepseek_v3``: a DeepseekV3 (MLA + MoE) of 5 layers, H = 80, trained 6 steps (seed 89), aux HF[1, 2, 4].

The train side is ``capture hf`` at batch size 3 (bfloat16); every serve dump derives from a capture of
the same prompts at batch size 1 (or 2) through the same weights or a variant of them, written as the
engine would hand it over (the aux concat), with the fault applied the way that engine fails. Each
case's expected cause comes from how it was built, never from the comparer.
"""

from __future__ import annotations

import atexit
import copy
import functools
import math
import os
import shutil
import tempfile

import numpy as np

from alignprobe.dump import DumpWriter, Provenance, StreamClaim, open_dump

# name -> (builder, layers, hidden, seed, train steps, aux HF indices, prompts (count, seed, min, max))
MODELS = {
    "qwen3": ("qwen3", 6, 64, 71, 12, (1, 3, 4), (7, 73, 36, 104)),
    "deepseek_v3": ("deepseek_v3", 5, 80, 89, 6, (1, 2, 4), (6, 97, 40, 96)),
}
CHUNK = 24  # the serve engine's chunked-prefill size, in tokens
WINDOW = 16  # the serve side's sliding attention window (the train side attends to every position)
GENERATED = 8  # decode steps whose rows a serve capture keeps after the prompt's
REVISION_NOISE = 0.05  # another revision: every weight moved by this fraction of its tensor's std
FINETUNE_NOISE = 0.1  # a fine-tune: the two layers below the deepest tap moved by this fraction
TP = 2  # tensor-parallel ranks of the row-parallel o_proj whose all-reduce is missing


def tiny_qwen3(num_layers: int, hidden_size: int, seed: int, **overrides):
    """A seeded Qwen3ForCausalLM (float32, CPU, eval), shaped like tiny_llama."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from alignprobe.demo.tiny_models import VOCAB

    config = Qwen3Config(vocab_size=VOCAB, hidden_size=hidden_size, intermediate_size=hidden_size * 2,
                         num_hidden_layers=num_layers, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                         max_position_embeddings=1024, tie_word_embeddings=False, **overrides)
    torch.manual_seed(seed)
    return Qwen3ForCausalLM(config).eval()


def _build(arch: str, n: int, h: int, seed: int, **overrides):
    from alignprobe.demo.tiny_models import tiny_deepseek_v3

    return {"qwen3": tiny_qwen3, "deepseek_v3": tiny_deepseek_v3}[arch](num_layers=n, hidden_size=h, seed=seed,
                                                                        **overrides)


def _model(name: str):
    from alignprobe.demo.tiny_models import train_briefly

    arch, n, h, seed, steps, _, _ = MODELS[name]
    return train_briefly(_build(arch, n, h, seed), steps=steps, batch=8, length=32, seed=seed)


def _perturbed(model, fraction: float, seed: int, only_layers=None):
    """A copy of ``model`` with each weight moved by seeded noise of ``fraction`` of its tensor's std
    (every tensor, or those of the decoder layers in ``only_layers``)."""
    import torch

    other = copy.deepcopy(model)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in other.named_parameters():
            if only_layers is not None and not any(f"layers.{i}." in name for i in only_layers):
                continue
            scale = float(p.std()) if p.numel() > 1 and float(p.std()) > 0 else float(p.abs().mean())
            p.add_(torch.randn(p.shape, generator=g) * fraction * scale)
    return other


def _pruned(model, drop: int):
    """A copy of ``model`` without decoder layer ``drop`` (a depth-pruned checkpoint)."""
    import torch

    other = copy.deepcopy(model)
    layers = [layer for i, layer in enumerate(other.model.layers) if i != drop]
    other.model.layers = torch.nn.ModuleList(layers)
    for i, layer in enumerate(layers):  # the attention's cache slot follows its new place
        if hasattr(layer.self_attn, "layer_idx"):
            layer.self_attn.layer_idx = i
    other.config.num_hidden_layers = len(layers)
    if getattr(other.config, "layer_types", None):
        other.config.layer_types = other.config.layer_types[: len(layers)]
    other.config.use_cache = False
    return other


def _embed_scaled(model, factor: float):
    """``model`` with its token embedding multiplied by ``factor`` (Gemma's sqrt(H) normalizer on one side)."""
    import torch

    other = copy.deepcopy(model)
    with torch.no_grad():
        other.model.embed_tokens.weight.mul_(factor)
    return other


def _fp8_round(t):
    """``t`` through float8_e4m3fn with one per-tensor scale (amax / 448), as an FP8 KV cache stores it."""
    import torch

    scale = t.detach().abs().amax().clamp(min=1e-12) / 448.0
    return ((t / scale).to(torch.float8_e4m3fn).to(t.dtype)) * scale


def _hooked(model, module_names, hook, pre=False):
    """A copy of ``model`` with ``hook`` on every submodule whose name ends with one of ``module_names``."""
    other = copy.deepcopy(model)
    for name, module in other.named_modules():
        if name.split(".")[-1] in module_names:
            (module.register_forward_pre_hook if pre else module.register_forward_hook)(hook)
    return other


def _kv_fp8(model):
    """The K and V projections' outputs (MLA: the compressed KV latent) rounded through FP8."""
    return _hooked(model, ("k_proj", "v_proj", "kv_a_proj_with_mqa"), lambda _m, _i, out: _fp8_round(out))


def _no_allreduce(model):
    """Every row-parallel o_proj reduced over rank 0's heads only: the residual gets one rank's partial
    sum (the all-reduce after attention left out)."""

    def rank0_only(_module, args):
        x = args[0].clone()
        x[..., x.shape[-1] // TP:] = 0
        return (x,)
    return _hooked(model, ("o_proj",), rank0_only, pre=True)


def _sliding(model, name: str):
    """The same weights, attention limited to the last WINDOW positions (Qwen3's sliding window)."""
    arch, n, h, seed, _, _, _ = MODELS[name]
    other = _build(arch, n, h, seed, use_sliding_window=True, sliding_window=WINDOW, max_window_layers=0)
    other.load_state_dict(model.state_dict())
    return other.eval()


def _continued(model, prompts, steps: int, rejected: bool):
    """The prompts with ``steps`` greedy tokens appended (decode), or with one token the greedy one is
    not (a rejected draft token, its state kept)."""
    import torch

    from alignprobe.probes.prompts import Prompt

    out = []
    with torch.no_grad():
        for p in prompts:
            ids = list(p.token_ids)
            for _ in range(steps):
                nxt = int(model(input_ids=torch.tensor([ids])).logits[0, -1].argmax())
                ids.append((nxt + 1) % model.config.vocab_size if rejected else nxt)
            out.append(Prompt(p.sample_id, ids))
    return out


def _read(path: str, n: int, h: int):
    with open_dump(path) as d:
        return ([str(s) for s in d.sample_ids], [d.token_ids(i).copy() for i in range(d.num_samples)],
                [d.states(i, "layers").reshape(-1, n + 1, h).copy() for i in range(d.num_samples)])


@functools.lru_cache(maxsize=None)
def holdout4_paths(name: str) -> dict[str, str]:
    """case -> its serve dump; "train" is capture hf (bfloat16, batch 3)."""
    from alignprobe.demo.scenarios import scenario_prompts
    from alignprobe.probes.hf import capture_hf

    arch, n, h, seed, _, aux, (count, prompt_seed, low, high) = MODELS[name]
    out = tempfile.mkdtemp(prefix=f"alignprobe-holdout4-{name}-")
    atexit.register(shutil.rmtree, out, True)
    model = _model(name)
    prompts = scenario_prompts(num_samples=count, seed=prompt_seed, min_len=low, max_len=high)
    model_name = f"tiny-{arch}"

    def capture(label, which=model, batch=1, dtype="bfloat16", these=prompts):
        return capture_hf(copy.deepcopy(which), these, os.path.join(out, f"{label}.h5"), batch_size=batch,
                          dtype=dtype, aux_layers=aux, progress=False, provenance={"model": model_name})

    paths = {"train": capture("train", batch=3)}

    def claim(layers, indices=aux, dtype="bfloat16"):
        return StreamClaim(tuple(indices), h, layers, dtype, "post", "drafter_input", "holdout4")

    def write(case, source, layers=n, indices=aux, dtype="bfloat16", each=lambda x, i: x, engine="sglang",
              rows=None):
        """The serve dump of ``case``: slices ``indices`` of the capture ``source`` (of a model of ``layers``
        layers), each row block passed through ``each``, claiming ``aux``."""
        ids, tokens, hf = _read(source, layers, h)
        path = os.path.join(out, f"{case}.h5")
        streams = {"hidden_states": claim(layers, dtype=dtype)}
        with DumpWriter(path, Provenance(engine=engine, dtype=dtype, model=model_name), streams) as w:
            for i in range(len(ids)):
                x = each(np.concatenate([hf[i][:, k] for k in indices], axis=1), i)
                keep = slice(None) if rows is None else rows(i, len(tokens[i]))
                w.add(ids[i], tokens[i][keep], {"hidden_states": x})
        paths[case] = path

    serve = capture("serve")
    # -- clean pairs: another dtype, another batch size ----------------------------------------------
    write("clean_batch1", serve)
    write("clean_fp16", capture("serve-fp16", dtype="float16"), dtype="float16")
    write("clean_fp32_batch2", capture("serve-fp32", batch=2, dtype="float32"), dtype="float32")
    # one planted tap fault on these models: SGLang's +1 on ids given as HF indices
    write("offset_plus1", serve, indices=tuple(k + 1 for k in aux))

    # -- serve rows past the prompt (decode steps; a rejected draft token's state kept) ---------------
    # (TorchSpec PR #28: states of prompt + completion captured; vLLM #14649: draft-step states kept)
    write("decode_rows", capture("serve-decode", these=_continued(model, prompts, GENERATED, False)))
    write("draft_row", capture("serve-draft", these=_continued(model, prompts, 1, True)))

    # -- another checkpoint: a revision, a fine-tune of the last layers, a pruned model, an embed scale
    write("revision", capture("serve-revision", _perturbed(model, REVISION_NOISE, seed + 1)))
    write("finetuned_last", capture("serve-finetuned", _perturbed(model, FINETUNE_NOISE, seed + 2, (aux[-1] - 2, aux[-1] - 1))))
    write("pruned", capture("serve-pruned", _pruned(model, n // 2)), layers=n - 1)
    write("embed_sqrt_h", capture("serve-embed", _embed_scaled(model, math.sqrt(h))))

    # -- rows normalised by the capture ----------------------------------------------------------------
    def per_slice(f):
        return lambda x, i: np.concatenate([f(x[:, j * h:(j + 1) * h]) for j in range(len(aux))], axis=1)
    write("l2_normalised", serve, each=per_slice(lambda s: s / np.linalg.norm(s, axis=1, keepdims=True)))
    write("layernorm_centred", serve, each=per_slice(
        lambda s: (s - s.mean(axis=1, keepdims=True)) / np.sqrt(s.var(axis=1, keepdims=True) + 1e-6)))

    # -- numbers: fp16 overflow in the deepest slice, an FP8 KV cache ---------------------------------
    def overflowed(x, i):  # from position 20 of every other request the deepest slice is inf (one channel) / nan
        if i % 2:
            x = x.copy()
            x[20:, (len(aux) - 1) * h:] = np.nan
            x[20:, (len(aux) - 1) * h] = np.inf
        return x
    write("fp16_overflow", os.path.join(out, "serve-fp16.h5"), dtype="float16", each=overflowed)
    write("kv_fp8", capture("serve-kvfp8", _kv_fp8(model)))

    # -- attention or reduction that differs: sliding window (Qwen3), a missing TP all-reduce ---------
    if arch == "qwen3":
        write("sliding_window", capture("serve-sliding", _sliding(model, name)))
    write("tp_no_allreduce", capture("serve-tp", _no_allreduce(model)))
    # ... its first two thirds of each prompt only (a serve side that stops early, rows at their positions)
    write("short_tp_no_allreduce", os.path.join(out, "serve-tp.h5"), each=lambda x, i: x[: 2 * len(x) // 3],
          rows=lambda i, length: slice(0, 2 * length // 3))

    # -- chunked prefill's last chunk paired with the prompt's first tokens (holdout3's open case) ----
    def last_chunk(length):
        return length - (length % CHUNK or CHUNK)

    def chunk_at_start(x, i):
        return x[last_chunk(len(x)):]
    write("chunk_last_at_start", serve, each=chunk_at_start, rows=lambda i, length: slice(0, length - last_chunk(length)))
    return paths


@functools.lru_cache(maxsize=None)
def holdout4_result(name: str, case: str, train: str = "train"):
    from alignprobe.compare import compare

    p = holdout4_paths(name)
    return compare(p[train], p[case])
