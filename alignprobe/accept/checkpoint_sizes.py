"""A drafter checkpoint's sizes and weights, checked before the drafter runs.

A config.json of the wrong types (``"hidden_size": "x"``, ``"num_key_value_heads": -1``, an
``eagle_config`` that is a number) or a weight of the wrong shape, or missing, used to fail inside
the forward as a torch or KeyError internal error; each is now one line naming the key or the weight.
The expected shapes are the EAGLE-3 decoder layer's as SpecForge and speculators write it: the
attention reads the [embedding, hidden] concat, 2H wide; the MLP and the norms are llama's.
"""

from __future__ import annotations

import math
from typing import Any

from alignprobe.errors import BadInput


def positive_int(holder: dict, key: str, default: int | None, where: str) -> int | None:
    """``holder[key]`` as a positive integer (absent, null or 0: ``default``); one line otherwise."""
    value = holder.get(key)
    if value is None or (value == 0 and not isinstance(value, bool)):
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadInput(f"--drafter {where}: {key} is {value!r}, expected a positive integer")
    return value


def positive_float(holder: dict, key: str, default: float, where: str) -> float:
    value = holder.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value > 0):
        raise BadInput(f"--drafter {where}: {key} is {value!r}, expected a positive number")
    return float(value)


def table(holder: dict, key: str, where: str) -> dict:
    """A nested config object (``eagle_config``, ``transformer_layer_config``): a dict, or {} when absent."""
    value = holder.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadInput(f"--drafter {where}: {key} is {value!r}, expected a JSON object")
    return value


def check_layer_sizes(layer: dict[str, Any], where: str) -> None:
    """The numbers the rope and the attention read from the layer config, beyond the head counts."""
    positive_float(layer, "rope_theta", 10000.0, where)
    positive_float(layer, "rms_norm_eps", 1e-6, where)
    positive_int(layer, "max_position_embeddings", None, where)


def check_weight_shapes(weights: dict, *, hidden: int, heads: int, kv_heads: int, head_dim: int, path: str) -> None:
    """Every weight the forward multiplies by, present and of the shape the sizes imply."""
    if heads % kv_heads:
        raise BadInput(f"--drafter {path}: num_attention_heads {heads} is not a multiple of num_key_value_heads {kv_heads}")
    gate = weights.get("layer.mlp.gate_proj.weight")
    intermediate = int(gate.shape[0]) if gate is not None and gate.ndim == 2 else None
    expected = {
        "layer.self_attn.q_proj.weight": (heads * head_dim, 2 * hidden),
        "layer.self_attn.k_proj.weight": (kv_heads * head_dim, 2 * hidden),
        "layer.self_attn.v_proj.weight": (kv_heads * head_dim, 2 * hidden),
        "layer.self_attn.o_proj.weight": (hidden, heads * head_dim),
        "layer.mlp.gate_proj.weight": (intermediate, hidden),
        "layer.mlp.up_proj.weight": (intermediate, hidden),
        "layer.mlp.down_proj.weight": (hidden, intermediate),
        "norm.weight": (hidden,),
        "lm_head.weight": (None, hidden),
    }
    optional_norms = ("layer.input_layernorm.weight", "layer.hidden_norm.weight", "layer.post_attention_layernorm.weight")
    expected.update({name: (hidden,) for name in optional_norms if name in weights})
    # fc is [H, taps x target H]: how many taps is the width checks' to judge (a finding, not a refusal)
    expected.update({name: shape for name, shape in (("fc.weight", (hidden, None)), ("embed_tokens.weight", (None, hidden)))
                     if name in weights})
    for name, shape in expected.items():
        if name not in weights:
            raise BadInput(f"--drafter {path}: the checkpoint lacks {name.replace('layer.', 'the decoder layer ', 1)}")
        got = tuple(int(n) for n in weights[name].shape)
        if len(got) != len(shape) or any(want is not None and want != have for want, have in zip(shape, got)):
            wanted = "[" + ", ".join("any" if n is None else str(n) for n in shape) + "]"
            raise BadInput(f"--drafter {path}: {name} has shape {list(got)}, where hidden_size {hidden}, "
                           f"{heads} heads of {head_dim} ({kv_heads} for keys and values) give {wanted}; "
                           "the config and the weights are of different models")
