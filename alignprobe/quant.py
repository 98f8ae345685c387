"""Weight-only fake quantization: what INT4/INT8/FP8 serving will roughly do to the hidden states.

``simulate_weight_quant`` rounds the decoder's weights to a quantized grid and back, in place, so a
BF16 checkpoint captured afterwards shows hidden states close to a weight-quantized server's.

It APPROXIMATES, it does not reproduce, a serving kernel. A real INT4 W4A16 deployment (Marlin,
compressed-tensors, the QAT INT4 experts of Kimi-K2.x) ships weights chosen by calibration (GPTQ,
AWQ, quantization-aware training) rather than round-to-nearest, may use other scale rules, zero
points and scale dtypes, and its kernels accumulate in their own order and precision. Use the
result to see the size and the layer profile of the drift, not to match a server bit for bit.

Schemes (all symmetric, round-to-nearest, no zero point):
- ``int4``: per group of ``group_size`` input columns, scale = max|w| / 7, levels -8..7.
- ``int8``: the same with scale = max|w| / 127, levels -128..127.
- ``fp8``:  per output channel, scale = max|w| / 448, a round trip through ``torch.float8_e4m3fn``.

Which weights: every ``nn.Linear`` inside the decoder layers (attention, dense MLP, shared experts)
and the fused routed-expert tensors that transformers 5.x keeps as 3-D parameters
``[experts, out, in]`` (``[experts, in, out]`` when the module says ``is_transposed``). Embeddings,
norms, the MoE router and the LM head stay as they are, as quantized checkpoints usually keep them.
"""

from __future__ import annotations

import dataclasses

import torch

from alignprobe.errors import BadInput

SCHEMES = ("int4", "int8", "fp8")
INT_MAX = {"int4": 7, "int8": 127}
FP8_E4M3_MAX = 448.0


@dataclasses.dataclass(frozen=True)
class QuantSettings:
    """What was applied to a model, for provenance (``model.alignprobe_quantization``)."""

    scheme: str
    group_size: int | None  # None for fp8 (per output channel)
    tensors: int  # how many weight tensors were rounded

    @property
    def label(self) -> str:
        """A short name for provenance: ``int4-w4a16-g128 (simulated RTN)``."""
        if self.scheme == "fp8":
            return "fp8-e4m3-per-channel (simulated RTN)"
        bits = 4 if self.scheme == "int4" else 8
        return f"{self.scheme}-w{bits}a16-g{self.group_size} (simulated RTN)"


def simulate_weight_quant(model: torch.nn.Module, scheme: str = "int4", group_size: int = 128) -> torch.nn.Module:
    """Fake-quantize the decoder weights of ``model`` in place; returns ``model``.

    ``group_size`` is the number of input columns sharing one scale (int4/int8); a last group
    shorter than ``group_size`` gets its own scale. Records a :class:`QuantSettings` on the model
    as ``alignprobe_quantization``.
    """
    scheme = scheme.lower()
    if scheme not in SCHEMES:
        raise BadInput(f"unknown quantization scheme {scheme!r}: choose one of {', '.join(SCHEMES)}")
    if scheme != "fp8" and (not isinstance(group_size, int) or group_size <= 0):
        raise BadInput(f"group size must be a positive integer, got {group_size!r}")
    count = 0
    with torch.no_grad():
        for weight, input_dim in _decoder_weights(model):
            weight.copy_(fake_quantize(weight, scheme, group_size, input_dim=input_dim))
            count += 1
    if count == 0:
        raise BadInput(f"{type(model).__name__}: found no decoder layers with linear weights to quantize")
    model.alignprobe_quantization = QuantSettings(scheme, None if scheme == "fp8" else group_size, count)
    return model


def fake_quantize(weight: torch.Tensor, scheme: str, group_size: int = 128, *, input_dim: int = -1) -> torch.Tensor:
    """``weight`` rounded to the scheme's grid and back, same shape and dtype.

    ``input_dim`` is the axis the matmul reduces over (the one groups run along).
    """
    moved = weight.movedim(input_dim, -1).float()
    if scheme == "fp8":
        scale = moved.abs().amax(dim=-1, keepdim=True).clamp_min(1e-12) / FP8_E4M3_MAX
        rounded = (moved / scale).to(torch.float8_e4m3fn).float() * scale
    else:
        rounded = _int_round_trip(moved, INT_MAX[scheme], group_size)
    return rounded.to(weight.dtype).movedim(-1, input_dim)


def _int_round_trip(w: torch.Tensor, qmax: int, group_size: int) -> torch.Tensor:
    columns = w.shape[-1]
    # A group wider than the row is the whole row (one scale per output channel, the same numbers):
    # padding the row out to it allocated rows x group_size, and 99999999999999999999 overflowed pad().
    group_size = min(group_size, max(columns, 1))
    pad = (-columns) % group_size
    # Zero padding never raises a group's max|w|, so the short last group keeps its own scale.
    padded = torch.nn.functional.pad(w, (0, pad))
    groups = padded.reshape(*w.shape[:-1], -1, group_size)
    scale = groups.abs().amax(dim=-1, keepdim=True).clamp_min(1e-12) / qmax
    q = torch.clamp(torch.round(groups / scale), -qmax - 1, qmax)
    return (q * scale).reshape(padded.shape)[..., :columns]


def _decoder_weights(model: torch.nn.Module):
    """Yield ``(weight, input_dim)`` for every matmul weight inside the decoder layers."""
    layers = _decoder_layers(model)
    for layer in layers:
        for module in layer.modules():
            if isinstance(module, torch.nn.Linear):
                yield module.weight, -1
            elif hasattr(module, "is_transposed"):
                # transformers 5.x fused experts (use_experts_implementation): 3-D [E, out, in],
                # or [E, in, out] when is_transposed.
                for param in module.parameters(recurse=False):
                    if param.ndim == 3:
                        yield param, (-2 if module.is_transposed else -1)


def _decoder_layers(model: torch.nn.Module):
    decoder = model.get_decoder() if hasattr(model, "get_decoder") else getattr(model, "model", model)
    layers = getattr(decoder, "layers", None)
    if not isinstance(layers, torch.nn.ModuleList):
        raise BadInput(f"{type(model).__name__}: no decoder layers at .model.layers, cannot simulate quantization")
    return layers
