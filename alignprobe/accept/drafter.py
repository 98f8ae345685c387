"""The EAGLE-3 drafter's forward, as vLLM and SGLang run it, over a whole captured sample at once.

For one sample of tokens x[0..S-1] and tapped target states a[0..S-1] (3H wide), draft step 1 at
position t reads ``[embed(x[t+1]), fc(a[t])]`` at rope position t and predicts x[t+2]; its keys and
values for every t form the cache the later steps attend to (the engine fills the drafter's cache
from the target's states after each verification). Draft step j > 1 at t reads ``[embed(x[t+j]),
h_{j-1}[t]]`` at position t+j-1, where h is the decoder layer's output before the final norm (after
it with ``norm_output``), and attends to the step-1 keys of positions 0..t plus its own chain's
keys of steps 2..j: the chain a drafted token follows when the tokens before it were accepted.

Width rules, the engines': a state as wide as the fc input goes through the pre-fc norms the config
asks for and ``fc``; a state H wide skips fc (SGLang without aux capture, vLLM with
``use_aux_hidden_state: false``); any other width is an error (vLLM crashes at the first decode).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from alignprobe.accept.checkpoint import DrafterCheckpoint


class WidthError(ValueError):
    """The engine could not feed states of this width to this drafter."""


class Eagle3Drafter:
    def __init__(self, checkpoint: DrafterCheckpoint, embed: torch.Tensor, device: str = "cpu",
                 dtype: torch.dtype = torch.float32):
        self.ckpt = checkpoint
        self.device = torch.device(device)
        self.dtype = dtype
        self.w = {k: v.to(self.device, dtype) for k, v in checkpoint.weights.items() if v.is_floating_point()}
        self.embed = embed.to(self.device, dtype)
        self.eps = checkpoint.rms_norm_eps
        self.heads, self.kv_heads, self.head_dim = checkpoint.num_heads, checkpoint.num_kv_heads, checkpoint.head_dim
        base = torch.arange(checkpoint.draft_vocab_size)
        offsets = checkpoint.d2t if checkpoint.d2t is not None else torch.zeros_like(base)
        self.draft_to_target = (base + offsets).to(self.device)
        self._rope = _rope_factory(checkpoint)

    # -- the pieces -------------------------------------------------------------------------------
    def project(self, states: torch.Tensor) -> torch.Tensor:
        """What the engine makes of one token's captured state: [T, W] -> [T, H]."""
        width = states.shape[-1]
        fc_in = self.ckpt.fc_input_width
        # use_aux_hidden_state decides what the engine captures (so the width it hands over), not
        # whether fc applies to states that are fc wide: the train side always ran through fc.
        if fc_in and width == fc_in:
            if self.ckpt.fc_norm:
                taps = states.chunk(self.ckpt.num_taps, dim=-1)
                states = torch.cat([self._rms(x, f"fc_norm.{i}.weight") for i, x in enumerate(taps)], dim=-1)
            if self.ckpt.norm_before_fc:
                states = self._rms(states, "input_norm.weight")
            return states @ self.w["fc.weight"].T
        if width == self.ckpt.hidden_size:
            return states
        raise WidthError(f"states {width} wide: the drafter takes {fc_in} (fc input) or {self.ckpt.hidden_size} (fc skipped)")

    def _rms(self, x: torch.Tensor, name: str) -> torch.Tensor:
        weight = self.w.get(name)
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return x * weight if weight is not None else x

    def _qkv_in(self, tokens: torch.Tensor, hidden: torch.Tensor):
        embeds = self._rms(self.embed[tokens], "layer.input_layernorm.weight")
        normed = self._rms(hidden, "layer.hidden_norm.weight")
        residual = normed if self.ckpt.norm_before_residual else hidden
        return torch.cat([embeds, normed], dim=-1), residual

    def _project_qkv(self, x: torch.Tensor, positions: torch.Tensor):
        t = x.shape[0]
        q = (x @ self.w["layer.self_attn.q_proj.weight"].T).view(t, self.heads, self.head_dim)
        k = (x @ self.w["layer.self_attn.k_proj.weight"].T).view(t, self.kv_heads, self.head_dim)
        v = (x @ self.w["layer.self_attn.v_proj.weight"].T).view(t, self.kv_heads, self.head_dim)
        cos, sin = self._rope(positions, self.device, self.dtype)
        q, k = _apply_rope(q, cos, sin), _apply_rope(k, cos, sin)
        repeat = self.heads // self.kv_heads
        k, v = k.repeat_interleave(repeat, dim=1), v.repeat_interleave(repeat, dim=1)
        return q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)  # [heads, T, d]

    def _finish(self, attended: torch.Tensor, residual: torch.Tensor):
        t = attended.shape[1]
        y = residual + attended.transpose(0, 1).reshape(t, -1) @ self.w["layer.self_attn.o_proj.weight"].T
        m = self._rms(y, "layer.post_attention_layernorm.weight")
        y = y + (F.silu(m @ self.w["layer.mlp.gate_proj.weight"].T) * (m @ self.w["layer.mlp.up_proj.weight"].T)) @ self.w["layer.mlp.down_proj.weight"].T
        normed = self._rms(y, "norm.weight")
        logits = normed @ self.w["lm_head.weight"].T
        return logits, (normed if self.ckpt.norm_output else y)

    # -- the chain --------------------------------------------------------------------------------
    def chain_logits(self, tokens: torch.Tensor, states: torch.Tensor, steps: int):
        with torch.no_grad():
            return self.chain(tokens, states, steps)

    def chain(self, tokens: torch.Tensor, states: torch.Tensor, steps: int):
        """(Differentiable: a trainer runs the same chain with weights that require grad.) Draft-vocab logits of each draft step at each chain start t = 0..S-steps-2: a list of
        ``steps`` tensors [T, draft_vocab]. Step j's input token is x[t+j] and its label x[t+j+1]."""
        tokens = tokens.to(self.device)
        length = tokens.shape[0] - steps - 1
        if length <= 0:
            return []
        positions = torch.arange(length, device=self.device)
        hidden = self.project(states[:length].to(self.device, self.dtype))
        scale = 1.0 / math.sqrt(self.head_dim)
        causal = torch.ones(length, length, dtype=torch.bool, device=self.device).tril()
        out = []
        base_k = base_v = None
        chain: list[tuple[torch.Tensor, torch.Tensor]] = []
        for step in range(1, steps + 1):
            x, residual = self._qkv_in(tokens[step : step + length], hidden)
            q, k, v = self._project_qkv(x, positions + (step - 1))
            if step == 1:
                base_k, base_v = k, v
                attended = F.scaled_dot_product_attention(q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0), is_causal=True).squeeze(0)
            else:
                chain.append((k, v))
                scores = (q @ base_k.transpose(1, 2)) * scale  # [heads, T, T]
                scores = scores.masked_fill(~causal, float("-inf"))
                own = torch.stack([(q * ck).sum(-1) * scale for ck, _ in chain], dim=-1)  # [heads, T, j-1]
                probs = torch.cat([scores, own], dim=-1).softmax(-1)
                attended = probs[..., :length] @ base_v
                for i, (_, cv) in enumerate(chain):
                    attended = attended + probs[..., length + i : length + i + 1] * cv
            logits, hidden = self._finish(attended, residual)
            out.append(logits)
        return out

    def to_target_ids(self, draft_ids: torch.Tensor) -> torch.Tensor:
        return self.draft_to_target[draft_ids]


def _apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    # The half-split rotation (rotate_half) that Llama checkpoints in HF layout use.
    first, second = x.chunk(2, dim=-1)
    rotated = torch.cat([-second, first], dim=-1)
    return x * cos[:, None, :] + rotated * sin[:, None, :]


def _rope_factory(checkpoint: DrafterCheckpoint):
    """cos/sin per position from the drafter's own rope settings (scaling types via transformers)."""
    layer = checkpoint.layer_config
    try:
        from transformers import LlamaConfig
        from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

        keep = {k: layer[k] for k in ("rope_theta", "rope_scaling", "rope_parameters", "max_position_embeddings",
                                       "partial_rotary_factor") if layer.get(k) is not None}
        config = LlamaConfig(hidden_size=checkpoint.hidden_size, num_attention_heads=checkpoint.num_heads,
                             num_key_value_heads=checkpoint.num_kv_heads, head_dim=checkpoint.head_dim, **keep)
        rotary = LlamaRotaryEmbedding(config)

        def rope(positions, device, dtype):
            probe = torch.zeros(1, device=device, dtype=torch.float32)
            cos, sin = rotary.to(device)(probe, positions.unsqueeze(0))
            return cos[0].to(dtype), sin[0].to(dtype)

        return rope
    except ImportError:  # without transformers: plain rope with the configured theta
        theta = float(layer.get("rope_theta", 10000.0))
        inv_freq = 1.0 / theta ** (torch.arange(0, checkpoint.head_dim, 2, dtype=torch.float32) / checkpoint.head_dim)

        def rope(positions, device, dtype):
            angles = positions.float()[:, None] * inv_freq.to(device)[None, :]
            angles = torch.cat([angles, angles], dim=-1)
            return angles.cos().to(dtype), angles.sin().to(dtype)

        return rope
