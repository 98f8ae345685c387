"""The target's embedding, LM head and final norm, read straight from its safetensors.

Only those tensors are read (safetensors' lazy ``safe_open``, one tensor at a time): a 61-layer
model is never loaded whole. ``model.safetensors.index.json`` says which shard holds each name.
"""

from __future__ import annotations

import dataclasses
import glob
import os

from alignprobe.errors import BadInput
from alignprobe.safe_json import flag_config, load_json_file

EMBED_NAMES = ("model.embed_tokens.weight", "embed_tokens.weight", "model.language_model.embed_tokens.weight")
LM_HEAD_NAMES = ("lm_head.weight", "model.lm_head.weight", "language_model.lm_head.weight")
NORM_NAMES = ("model.norm.weight", "norm.weight", "model.language_model.norm.weight")


@dataclasses.dataclass
class TargetWeights:
    """What the drafter borrows from its target (float32 CPU tensors; None where absent)."""

    path: str
    embed: object = None  # [V, H]
    lm_head: object = None  # [V, H]; the embedding when the config ties them
    final_norm: object = None  # [H]
    vocab_size: int | None = None
    hidden_size: int | None = None
    num_layers: int | None = None
    rms_norm_eps: float = 1e-6


def read_target_weights(path: str | os.PathLike) -> TargetWeights:
    path = os.fspath(path)
    config = _config(path)
    shards = _shard_of(path)
    found = TargetWeights(path=path, vocab_size=config.get("vocab_size"), hidden_size=config.get("hidden_size"),
                          num_layers=config.get("num_hidden_layers"), rms_norm_eps=float(config.get("rms_norm_eps", 1e-6)))
    found.embed = _first(path, shards, EMBED_NAMES)
    found.lm_head = _first(path, shards, LM_HEAD_NAMES)
    if found.lm_head is None and config.get("tie_word_embeddings"):
        found.lm_head = found.embed
    found.final_norm = _first(path, shards, NORM_NAMES)
    if found.embed is None and found.lm_head is None:
        raise BadInput(f"--target {path}: no embedding or lm_head tensor in its safetensors "
                       f"(looked for {EMBED_NAMES[0]} and {LM_HEAD_NAMES[0]})")
    return found


def _config(path: str) -> dict:
    config = flag_config(path, "--target", "target model")
    # Multimodal wrappers keep the language model's sizes one level down.
    return config.get("text_config") or config


def _shard_of(path: str) -> dict[str, str]:
    """Tensor name -> file, from the index when there is one, else by opening each file's header."""
    index = os.path.join(path, "model.safetensors.index.json")
    if os.path.isfile(index):
        weight_map = load_json_file(index, "--target safetensors index")
        weight_map = weight_map.get("weight_map") if isinstance(weight_map, dict) else None
        if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
            raise BadInput(f"--target {index}: not a safetensors index (no weight_map of tensor -> file)")
        return {name: os.path.join(path, shard) for name, shard in weight_map.items()}
    from safetensors import safe_open

    files = sorted(glob.glob(os.path.join(path, "*.safetensors")))
    if not files:
        raise BadInput(f"--target {path}: no *.safetensors files there")
    shards: dict[str, str] = {}
    for name in files:
        with safe_open(name, framework="pt") as fh:
            shards.update({key: name for key in fh.keys()})
    return shards


def _first(path: str, shards: dict[str, str], names: tuple[str, ...]):
    from safetensors import safe_open

    for name in names:
        if name in shards:
            try:
                with safe_open(shards[name], framework="pt") as fh:
                    return fh.get_tensor(name).float()
            except Exception as exc:  # noqa: BLE001 - a damaged shard is the user's input
                raise BadInput(f"--target {shards[name]}: cannot read {name} ({exc})") from None
    return None
