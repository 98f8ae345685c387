"""Load an EAGLE-3 drafter checkpoint: the SpecForge layout or the speculators layout, one record.

SpecForge (``LlamaForCausalLMEagle3``): ``fc.weight`` [H, 3H], ``midlayer.*``, ``norm.weight``,
``lm_head.weight`` over the draft vocab, optional ``d2t`` / ``t2d`` and ``embed_tokens.weight``;
the layer ids in ``eagle_config.eagle_aux_hidden_state_layer_ids`` (the top-level key wins when
both are there: alignprobe/layer_ids.py states the one precedence and its source); the norm flags
below where vLLM reads them for this layout (``norm_before_fc`` in eagle_config or at the top level).
speculators (``speculators_model_type: eagle3``): ``layers.0.*`` for the decoder layer, the sizes in
``transformer_layer_config``, the ids at the top level, and the flags ``norm_before_fc`` (one RMSNorm
``input_norm`` over the 3H concat), ``fc_norm`` (one RMSNorm per tapped state), ``norm_before_residual``
(the residual is the normed fc output) and ``norm_output`` (the state fed to the next draft step is
the normed one). Both become the same :class:`DrafterCheckpoint` with the decoder layer under ``layer.*``.
"""

from __future__ import annotations

import dataclasses
import glob
import os
from typing import Any

from alignprobe.accept.checkpoint_sizes import check_layer_sizes, check_weight_shapes, positive_float, positive_int, table
from alignprobe.errors import BadInput
from alignprobe.layer_ids import layer_ids_in_config
from alignprobe.safe_json import flag_config

LAYOUT_SPECFORGE = "specforge"
LAYOUT_SPECULATORS = "speculators"


@dataclasses.dataclass
class DrafterCheckpoint:
    """One EAGLE-3 drafter, whatever layout it came in. ``weights`` are float32 CPU tensors."""

    path: str
    layout: str
    config: dict[str, Any]  # the config.json as written
    weights: dict  # canonical names: fc.weight, input_norm.weight, fc_norm.{i}.weight, layer.*, norm.weight, lm_head.weight, embed_tokens.weight
    d2t: Any = None  # int64 [draft_vocab]: target id = draft id + d2t[draft id]; None when the vocabularies are equal
    t2d: Any = None  # bool [target_vocab]: which target ids the draft vocab holds
    layer_ids: tuple[int, ...] | None = None  # the tap ids as the config states them (engine numbering)
    layer_ids_source: str = ""  # which config key they came from
    use_aux_hidden_state: bool = True
    norm_before_fc: bool = False
    fc_norm: bool = False
    norm_before_residual: bool = False
    norm_output: bool = False
    hidden_size: int = 0
    target_hidden_size: int = 0
    num_heads: int = 0
    num_kv_heads: int = 0
    head_dim: int = 0
    rms_norm_eps: float = 1e-6
    draft_vocab_size: int = 0
    target_vocab_size: int | None = None  # from the config, when it says
    layer_config: dict[str, Any] = dataclasses.field(default_factory=dict)  # the llama-style sizes and rope

    @property
    def fc_input_width(self) -> int:
        return int(self.weights["fc.weight"].shape[1]) if "fc.weight" in self.weights else 0

    @property
    def num_taps(self) -> int:
        width = self.target_hidden_size or self.hidden_size
        return self.fc_input_width // width if width else 0


def load_drafter(path: str | os.PathLike) -> DrafterCheckpoint:
    """Read ``config.json`` and the safetensors (or ``pytorch_model.bin``) of a drafter folder."""
    path = os.fspath(path)
    config = flag_config(path, "--drafter", "drafter checkpoint")
    raw = _read_weights(path)
    if config.get("speculators_model_type") == "eagle3" or any(k.startswith("layers.0.") for k in raw):
        return _speculators(path, config, raw)
    if any(k.startswith("midlayer.") for k in raw):
        return _specforge(path, config, raw)
    raise BadInput(f"--drafter {path}: neither a SpecForge (midlayer.*) nor a speculators (layers.0.*) "
                   "EAGLE-3 checkpoint: no decoder-layer weights found")


def _read_weights(path: str) -> dict:
    import torch

    files = sorted(glob.glob(os.path.join(path, "*.safetensors")))
    weights: dict = {}
    if files:
        from safetensors import safe_open

        for name in files:
            try:
                with safe_open(name, framework="pt") as fh:
                    for key in fh.keys():
                        weights[key] = fh.get_tensor(key)
            except Exception as exc:  # noqa: BLE001 - a corrupt file is the user's input
                raise BadInput(f"--drafter {name}: not a readable safetensors file ({exc})") from None
    else:
        bins = sorted(glob.glob(os.path.join(path, "pytorch_model*.bin")))
        if not bins:
            raise BadInput(f"--drafter {path}: no *.safetensors or pytorch_model.bin weights there")
        for name in bins:
            try:
                weights.update(torch.load(name, map_location="cpu", weights_only=True))
            except Exception as exc:  # noqa: BLE001
                raise BadInput(f"--drafter {name}: not a readable torch checkpoint ({exc})") from None
    # A "model." prefix (some exporters) names the same tensors.
    weights = {k[len("model."):] if k.startswith("model.") else k: v for k, v in weights.items()}
    return {k: (v if k in ("d2t", "t2d") else v.float()) for k, v in weights.items()}


def _specforge(path: str, config: dict, raw: dict) -> DrafterCheckpoint:
    weights = {("layer." + k[len("midlayer."):] if k.startswith("midlayer.") else k): v for k, v in raw.items()}
    eagle = table(config, "eagle_config", path)
    ids, source = layer_ids_in_config(config, f"--drafter {path}")
    return _finish(path, LAYOUT_SPECFORGE, config, config, weights, ids, source,
                   use_aux=bool(eagle.get("use_aux_hidden_state", True)),
                   flags=_specforge_flags(config, eagle))


def _specforge_flags(config: dict, eagle: dict) -> dict:
    """The norm flags as vLLM's LlamaForCausalLMEagle3 reads them (model_executor/models/llama_eagle3.py):
    norm_before_fc from eagle_config, else the top level; fc_norm, norm_before_residual, norm_output
    from the top level."""
    flags = {name: bool(config.get(name, False)) for name in ("fc_norm", "norm_before_residual", "norm_output")}
    flags["norm_before_fc"] = bool(eagle.get("norm_before_fc", config.get("norm_before_fc", False)))
    return flags


def _speculators(path: str, config: dict, raw: dict) -> DrafterCheckpoint:
    weights = {("layer." + k[len("layers.0."):] if k.startswith("layers.0.") else k): v for k, v in raw.items()}
    extra = [k for k in weights if k.startswith("layers.")]
    if extra:
        raise BadInput(f"--drafter {path}: {len(extra)} weights of a second decoder layer ({extra[0]}): "
                       "only one-layer EAGLE-3 drafters are supported")
    layer = table(config, "transformer_layer_config", path) or config
    table(config, "eagle_config", path)  # a non-table eagle_config is refused in either layout
    ids, source = layer_ids_in_config(config, f"--drafter {path}")
    flags = {name: bool(config.get(name, False)) for name in ("norm_before_fc", "fc_norm", "norm_before_residual", "norm_output")}
    return _finish(path, LAYOUT_SPECULATORS, config, layer, weights, ids, source, use_aux=True, flags=flags)


def _finish(path, layout, config, layer, weights, ids, source, *, use_aux, flags) -> DrafterCheckpoint:
    for need in ("layer.self_attn.q_proj.weight", "norm.weight", "lm_head.weight"):
        if need not in weights:
            raise BadInput(f"--drafter {path}: the checkpoint lacks {need} (layout {layout})")
    hidden = positive_int(layer, "hidden_size", int(weights["norm.weight"].shape[0]), path)
    heads = positive_int(layer, "num_attention_heads", None, path)
    if heads is None:
        raise BadInput(f"--drafter {path}: the config gives no num_attention_heads")
    head_dim = positive_int(layer, "head_dim", hidden // heads, path)
    kv_heads = positive_int(layer, "num_key_value_heads", heads, path)
    if head_dim == 0:
        raise BadInput(f"--drafter {path}: hidden_size {hidden} is smaller than num_attention_heads {heads}")
    check_layer_sizes(layer, path)
    check_weight_shapes(weights, hidden=hidden, heads=heads, kv_heads=kv_heads, head_dim=head_dim, path=path)
    target_hidden = (positive_int(config, "target_hidden_size", None, path) or positive_int(layer, "target_hidden_size", None, path)
                     or hidden)
    d2t = weights.pop("d2t", None)
    t2d = weights.pop("t2d", None)
    draft_vocab = int(weights["lm_head.weight"].shape[0])
    target_vocab = config.get("target_vocab_size") or (t2d.numel() if t2d is not None else None)
    if target_vocab is None and d2t is None:
        target_vocab = positive_int(layer, "vocab_size", draft_vocab, path)
    elif target_vocab is not None and not isinstance(target_vocab, int):
        target_vocab = positive_int(config, "target_vocab_size", None, path)
    return DrafterCheckpoint(
        path=path, layout=layout, config=config, weights=weights,
        d2t=None if d2t is None else d2t.long(), t2d=None if t2d is None else t2d.bool(),
        layer_ids=None if ids is None else tuple(ids), layer_ids_source=source, use_aux_hidden_state=use_aux,
        norm_before_fc=flags.get("norm_before_fc", False), fc_norm=flags.get("fc_norm", False),
        norm_before_residual=flags.get("norm_before_residual", False), norm_output=flags.get("norm_output", False),
        hidden_size=hidden, target_hidden_size=target_hidden,
        num_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim,
        rms_norm_eps=positive_float(layer, "rms_norm_eps", 1e-6, path), draft_vocab_size=draft_vocab,
        target_vocab_size=None if target_vocab is None else int(target_vocab), layer_config=dict(layer),
    )
