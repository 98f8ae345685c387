"""One forward pass of a transformers causal LM, keeping only the hidden states asked for, by HF index.

HF indices as transformers 5.24 numbers ``output_hidden_states``: HF[0] the embedding output, HF[k]
the input of decoder layer k, HF[N] the output of the final norm; the pre-norm output of the last
layer (the final norm's input) is not among them. Rather than ``output_hidden_states=True``, which
holds all N+1 states of the batch until the forward ends (61 layers x 7168 x bf16 is 0.9 MB a token),
forward hooks take exactly these tensors: a pre-hook on decoder layer k keeps its input, a hook on
the final norm keeps its input and output. They are the tensors ``output_hidden_states`` would
return (tests check both ways agree bit for bit), and nothing else stays alive.

Only the decoder runs (``get_decoder()``): the LM head's logits, a ``[tokens, vocab]`` tensor
(129280 columns for DeepSeek-V3), are never computed. Under a device map (accelerate) each kept
state lies on the device of the layer that produced it.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Iterable

import torch

from alignprobe.engine_errors import engine_failure


@dataclasses.dataclass
class ForwardStates:
    """``hf[k]`` is HF[k] ``[batch, seq, hidden]`` for each kept k; ``final_prenorm`` the final norm's input."""

    hf: dict[int, torch.Tensor]
    final_prenorm: torch.Tensor
    num_layers: int


def decoder_of(model) -> torch.nn.Module:
    return model.get_decoder() if hasattr(model, "get_decoder") else model.model


def final_norm_module(model) -> torch.nn.Module:
    """The final norm of a causal LM (``model.model.norm`` for Llama, DeepseekV3 and most decoders)."""
    norm = getattr(decoder_of(model), "norm", None)
    if not isinstance(norm, torch.nn.Module):
        raise ValueError(f"{type(model).__name__} has no final norm at .model.norm: alignprobe cannot find HF[N]")
    return norm


def decoder_layers(model) -> torch.nn.ModuleList:
    layers = getattr(decoder_of(model), "layers", None)
    if not isinstance(layers, torch.nn.ModuleList):
        raise ValueError(f"{type(model).__name__} has no decoder layers at .model.layers: alignprobe cannot hook HF[k]")
    return layers


@torch.inference_mode()
def forward_states(
    model,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    position_ids: torch.Tensor | None = None,
    keep: Iterable[int] | None = None,
) -> ForwardStates:
    """Run the decoder once; returns HF[k] for every k in ``keep`` (default all N+1) and the pre-norm state.

    ``position_ids`` matter for left padding: transformers numbers positions from the first
    column, pad or not, so a left-padded sample needs its positions counted from its first token.
    """
    layers = decoder_layers(model)
    n = len(layers)
    wanted = set(range(n + 1) if keep is None else keep)
    captured: dict[int, torch.Tensor] = {}
    pre: dict[str, torch.Tensor] = {}
    # Hooks belong to the module, not the call: a forward of the same model on another thread (a
    # server answering requests side by side) runs them too, and must not fill this call's states.
    mine = threading.get_ident()

    def keep_input(index: int):
        def hook(_module, args, kwargs) -> None:
            # Must return None: a pre-hook's return value would replace the layer's inputs.
            if threading.get_ident() == mine:
                captured.setdefault(index, args[0] if args else kwargs["hidden_states"])
        return hook

    def keep_norm(_module, inputs, output) -> None:
        # Must return None: a forward hook's return value replaces the module's output, and
        # returning the input would silently skip the final norm.
        if threading.get_ident() == mine:
            pre.setdefault("pre", inputs[0])
            captured.setdefault(n, output)

    handles = [layers[k].register_forward_pre_hook(keep_input(k), with_kwargs=True) for k in sorted(wanted) if k < n]
    handles.append(final_norm_module(model).register_forward_hook(keep_norm))
    try:
        with engine_failure("transformers", "running the model forward"):
            decoder_of(model)(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                              use_cache=False)
    finally:
        for handle in handles:
            handle.remove()
    return ForwardStates(hf={k: captured[k] for k in sorted(wanted)}, final_prenorm=pre["pre"], num_layers=n)
