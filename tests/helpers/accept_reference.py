"""A reference speculative-decoding loop (greedy, chain of k drafts), written apart from alignprobe.accept.

It does what an engine does, the slow plain way: the target re-runs the whole sequence each round
(transformers, no cache); the drafter keeps a list of entries (token, state, position), one per
verified position fed with the target's aux states through fc, then one per drafted token fed with
the drafter's own pre-norm output, and re-runs its single layer over all entries with a causal mask
(nn.Module code, not the library's chained attention). Drafts are verified against the target's
greedy tokens; counters as vLLM keeps them: drafts, accepted per position.
"""

from __future__ import annotations

import json
import os

import torch
import torch.nn.functional as F
from safetensors.torch import load_file


class ReferenceDrafter(torch.nn.Module):
    def __init__(self, path: str, embed: torch.Tensor):
        super().__init__()
        self.cfg = json.load(open(os.path.join(path, "config.json")))
        self.w = load_file(os.path.join(path, "model.safetensors"))
        self.embed = embed
        self.heads = self.cfg["num_attention_heads"]
        self.kv = self.cfg["num_key_value_heads"]
        self.hd = self.cfg["head_dim"]
        self.eps = self.cfg["rms_norm_eps"]
        inv = 1.0 / (self.cfg["rope_theta"] ** (torch.arange(0, self.hd, 2).float() / self.hd))
        self.register_buffer("inv_freq", inv)

    def norm(self, x, name):
        return F.rms_norm(x, (x.shape[-1],), self.w[name], self.eps)

    def rope(self, x, pos):  # x [heads, T, hd]
        ang = pos.float()[:, None] * self.inv_freq[None]
        cos, sin = torch.cat([ang, ang], -1).cos(), torch.cat([ang, ang], -1).sin()
        a, b = x[..., : self.hd // 2], x[..., self.hd // 2:]
        return x * cos + torch.cat([-b, a], -1) * sin

    def fc(self, aux):
        return aux @ self.w["fc.weight"].T

    def forward(self, tokens, hidden, pos):
        """Entries [T]; returns (logits of the last entry, its pre-norm output)."""
        e = self.norm(self.embed[tokens], "midlayer.input_layernorm.weight")
        h = self.norm(hidden, "midlayer.hidden_norm.weight")
        x = torch.cat([e, h], -1)
        t = x.shape[0]
        q = (x @ self.w["midlayer.self_attn.q_proj.weight"].T).view(t, self.heads, self.hd).transpose(0, 1)
        k = (x @ self.w["midlayer.self_attn.k_proj.weight"].T).view(t, self.kv, self.hd).transpose(0, 1)
        v = (x @ self.w["midlayer.self_attn.v_proj.weight"].T).view(t, self.kv, self.hd).transpose(0, 1)
        q, k = self.rope(q, pos), self.rope(k, pos)
        rep = self.heads // self.kv
        k, v = k.repeat_interleave(rep, 0), v.repeat_interleave(rep, 0)
        mask = torch.ones(t, t, dtype=torch.bool).tril()
        att = ((q @ k.transpose(1, 2)) / self.hd ** 0.5).masked_fill(~mask, float("-inf")).softmax(-1) @ v
        y = hidden + att.transpose(0, 1).reshape(t, -1) @ self.w["midlayer.self_attn.o_proj.weight"].T
        m = self.norm(y, "midlayer.post_attention_layernorm.weight")
        y = y + (F.silu(m @ self.w["midlayer.mlp.gate_proj.weight"].T) * (m @ self.w["midlayer.mlp.up_proj.weight"].T)) @ self.w["midlayer.mlp.down_proj.weight"].T
        logits = self.norm(y, "norm.weight") @ self.w["lm_head.weight"].T
        return logits[-1], y[-1]


@torch.no_grad()
def speculative_decode(target, drafter: ReferenceDrafter, prompt: list[int], new_tokens: int, k: int, taps, state_fn=None):
    """Greedy speculative decoding; returns (generated tokens, drafts, accepted per position, accepted per draft).

    ``state_fn(hidden_states tuple) -> aux [S, W]``: what the serving engine feeds the drafter
    (default: the concat of ``taps``); a width of H skips fc, as the engines do.
    """
    state_fn = state_fn or (lambda hs: torch.cat([hs[i][0] for i in taps], -1))
    seq = list(prompt)
    drafts, accepted = 0, [0] * k
    per_draft = []  # tokens accepted in each draft, for the standard error
    goal = len(prompt) + new_tokens
    while len(seq) < goal:
        out = target(input_ids=torch.tensor([seq]), output_hidden_states=True)
        aux = state_fn(out.hidden_states)
        if len(seq) == len(prompt):  # prefill: the first token comes from the target alone
            seq.append(int(out.logits[0, -1].argmax()))
            continue
        # entries for verified positions 0..L-2: token x[i+1], state of position i
        tokens = torch.tensor(seq[1:])
        hidden = drafter.fc(aux[:-1]) if aux.shape[-1] != drafter.cfg["hidden_size"] else aux[:-1]
        pos = torch.arange(len(seq) - 1)
        proposal = []
        for _ in range(k):
            logits, h_out = drafter(tokens, hidden, pos)
            token = int(logits.argmax())
            proposal.append(token)
            tokens = torch.cat([tokens, torch.tensor([token])])
            hidden = torch.cat([hidden, h_out[None]])
            pos = torch.cat([pos, pos[-1:] + 1])
        verify = target(input_ids=torch.tensor([seq + proposal])).logits[0].argmax(-1)
        base = len(seq) - 1
        drafts += 1
        n_ok = 0
        for j, token in enumerate(proposal):
            if int(verify[base + j]) != token:
                break
            n_ok += 1
            accepted[j] += 1
        per_draft.append(n_ok)
        seq.extend(proposal[:n_ok])
        seq.append(int(verify[base + n_ok]))
    return seq[len(prompt):goal], drafts, accepted, per_draft
