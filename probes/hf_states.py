"""One forward pass of a transformers causal LM, with every hidden state named by its HF index.

Checked against transformers 5.24: ``output_hidden_states=True`` returns N+1 tensors, HF[0] the
embedding output, HF[k] the input of decoder layer k, HF[N] the output of the final norm. The
pre-norm output of the last layer is not among them, so a forward hook on the final norm takes
its input.
"""

from __future__ import annotations

import dataclasses

import torch

from alignprobe.engine_errors import engine_failure


@dataclasses.dataclass
class ForwardStates:
    """``hf[k]`` is HF[k] ``[batch, seq, hidden]``; ``final_prenorm`` is the last layer's output before the norm."""

    hf: list[torch.Tensor]
    final_prenorm: torch.Tensor

    @property
    def num_layers(self) -> int:
        return len(self.hf) - 1


def final_norm_module(model) -> torch.nn.Module:
    """The final norm of a causal LM (``model.model.norm`` for Llama, DeepseekV3 and most decoders)."""
    decoder = model.get_decoder() if hasattr(model, "get_decoder") else model.model
    norm = getattr(decoder, "norm", None)
    if not isinstance(norm, torch.nn.Module):
        raise ValueError(f"{type(model).__name__} has no final norm at .model.norm: alignprobe cannot find HF[N]")
    return norm


@torch.inference_mode()
def forward_states(
    model,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    position_ids: torch.Tensor | None = None,
) -> ForwardStates:
    """Run ``model`` once and return all N+1 HF states plus the pre-norm final state.

    ``position_ids`` matter for left padding: transformers numbers positions from the first
    column, pad or not, so a left-padded sample needs its positions counted from its first token.
    """
    captured: dict[str, torch.Tensor] = {}

    def keep_norm_input(_module, inputs, _output) -> None:
        # Must return None: a forward hook's return value replaces the module's output, and
        # returning the input would silently skip the final norm (HF[N] and the logits).
        captured.setdefault("pre", inputs[0])

    hook = final_norm_module(model).register_forward_hook(keep_norm_input)
    try:
        with engine_failure("transformers", "running the model forward"):
            out = model(
                input_ids=input_ids,
                attention_mask=attention_mask,
                position_ids=position_ids,
                output_hidden_states=True,
                use_cache=False,
            )
    finally:
        hook.remove()
    return ForwardStates(hf=list(out.hidden_states), final_prenorm=captured["pre"])
