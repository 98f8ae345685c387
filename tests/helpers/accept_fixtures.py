"""Tiny drafters in both checkpoint layouts, and a tiny target with dumps, for the accept tests."""

from __future__ import annotations

import json
import os

import torch

from alignprobe.demo import tiny_drafter


def specforge_drafter(path, target_config, layer_ids=(2, 4, 5), seed: int = 0, draft_vocab: int | None = None,
                      config_updates: dict | None = None, with_embed: bool = False, embed=None) -> str:
    """A random-weight drafter in the SpecForge layout; ``draft_vocab`` < V adds a d2t/t2d mapping."""
    config = tiny_drafter.drafter_config(target_config, layer_ids)
    weights = tiny_drafter.init_drafter_weights(config, seed)
    if draft_vocab is not None:
        keep = torch.arange(0, target_config.vocab_size, target_config.vocab_size // draft_vocab)[:draft_vocab]
        weights["lm_head.weight"] = weights["lm_head.weight"][:draft_vocab]
        weights["d2t"] = keep - torch.arange(draft_vocab)
        t2d = torch.zeros(target_config.vocab_size, dtype=torch.bool)
        t2d[keep] = True
        weights["t2d"] = t2d
        config["draft_vocab_size"] = draft_vocab
    if with_embed:
        weights["embed_tokens.weight"] = embed
    config.update(config_updates or {})
    return _save(path, config, weights)


def speculators_from_specforge(src: str, path, flags: dict | None = None) -> str:
    """The same weights in the speculators layout (layers.0.*, transformer_layer_config, top-level ids)."""
    from safetensors.torch import load_file

    config = json.load(open(os.path.join(src, "config.json")))
    weights = {k.replace("midlayer.", "layers.0."): v for k, v in load_file(os.path.join(src, "model.safetensors")).items()}
    layer = {k: v for k, v in config.items() if k not in ("eagle_config", "architectures")}
    new = {"architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3",
           "eagle_aux_hidden_state_layer_ids": config["eagle_config"]["eagle_aux_hidden_state_layer_ids"],
           "draft_vocab_size": config["draft_vocab_size"], "norm_before_residual": False, "norm_before_fc": False,
           "fc_norm": False, "norm_output": False, "target_hidden_size": config["target_hidden_size"],
           "transformer_layer_config": layer}
    new.update(flags or {})
    return _save(path, new, weights)


def _save(path, config, weights) -> str:
    from safetensors.torch import save_file

    path = os.fspath(path)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as fh:
        json.dump(config, fh)
    save_file({k: v.contiguous() for k, v in weights.items()}, os.path.join(path, "model.safetensors"))
    return path


def tiny_target_and_dumps(root, hidden_size: int = 32, num_samples: int = 4, length: int = 40):
    """A random tiny Llama target folder and a train dump (all layers, eagle3 aux) of seeded prompts."""
    from alignprobe.demo.tiny_models import tiny_llama
    from alignprobe.probes.hf import capture_hf
    from alignprobe.probes.prompts import Prompt

    root = os.fspath(root)
    model = tiny_llama(num_layers=8, hidden_size=hidden_size, seed=0, tie_word_embeddings=False)
    target = os.path.join(root, "target")
    model.save_pretrained(target)
    tokens = tiny_drafter.pair_corpus(num_samples, length, seed=3)
    prompts = [Prompt(f"s{i}", row.tolist()) for i, row in enumerate(tokens)]
    train = capture_hf(model, prompts, os.path.join(root, "train.h5"), progress=False, batch_size=4)
    return model, target, train, prompts
