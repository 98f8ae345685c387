"""Tiny seeded models with real architectures, for the demo, the tests and the benchmarks.

No download: a transformers config builds the real code path (DeepseekV3 has MLA attention and
MoE routing, like Kimi-K2.x) with random weights. Random weights give hidden states without the
structure of a trained model (growing norms, outlier channels), so :func:`train_briefly` fits
the model for a few seconds on a seeded synthetic corpus where numbers must look trained.
"""

from __future__ import annotations

import torch

VOCAB = 512


def tiny_llama(num_layers: int = 8, hidden_size: int = 64, seed: int = 0, **overrides):
    """A seeded LlamaForCausalLM of ``num_layers`` layers (float32, CPU, eval mode)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(**{
        "vocab_size": VOCAB,
        "hidden_size": hidden_size,
        "intermediate_size": hidden_size * 2,
        "num_hidden_layers": num_layers,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 1024,
        **overrides,  # may replace any of the above
    })
    torch.manual_seed(seed)
    return LlamaForCausalLM(config).eval()


def tiny_deepseek_v3(num_layers: int = 6, hidden_size: int = 64, seed: int = 0, **overrides):
    """A seeded DeepseekV3ForCausalLM (MLA + MoE, first layer dense), float32, CPU, eval mode."""
    from transformers import DeepseekV3Config, DeepseekV3ForCausalLM

    config = DeepseekV3Config(
        vocab_size=VOCAB,
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        moe_intermediate_size=hidden_size // 2,
        num_hidden_layers=num_layers,
        num_attention_heads=4,
        num_key_value_heads=4,
        n_routed_experts=8,
        num_experts_per_tok=2,
        n_shared_experts=1,
        first_k_dense_replace=1,
        n_group=2,
        topk_group=1,
        kv_lora_rank=16,
        q_lora_rank=24,
        qk_rope_head_dim=8,
        qk_nope_head_dim=8,
        v_head_dim=16,
        max_position_embeddings=1024,
        **overrides,
    )
    torch.manual_seed(seed)
    return DeepseekV3ForCausalLM(config).eval()


def synthetic_corpus(num_sequences: int, length: int, seed: int = 0, vocab: int = VOCAB) -> torch.Tensor:
    """Token sequences from a seeded sparse Markov chain: learnable structure, no download."""
    g = torch.Generator().manual_seed(seed)
    # Each token has 4 likely successors: a model that learns them has trained-looking states.
    successors = torch.randint(0, vocab, (vocab, 4), generator=g)
    tokens = torch.empty(num_sequences, length, dtype=torch.long)
    tokens[:, 0] = torch.randint(0, vocab, (num_sequences,), generator=g)
    for t in range(1, length):
        choice = torch.randint(0, 4, (num_sequences,), generator=g)
        tokens[:, t] = successors[tokens[:, t - 1], choice]
    return tokens


def train_briefly(model, steps: int = 60, batch: int = 16, length: int = 64, lr: float = 3e-3, seed: int = 0,
                  on_step=None):
    """Fit ``model`` on the synthetic corpus for a few seconds; returns it in eval mode. ``on_step``
    is called with a short text after each optimizer step (the demo's progress bar)."""
    torch.manual_seed(seed)
    data = synthetic_corpus(steps * batch, length, seed=seed, vocab=model.config.vocab_size)
    return fit(model, data, batch, lr, on_step)


def fit(model, data: torch.Tensor, batch: int, lr: float, on_step=None):
    """Next-token training on ``data`` (one optimizer step per ``batch`` rows); the last loss is kept
    as ``model.train_loss`` and the model is returned in eval mode."""
    steps = len(data) // batch
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    for step in range(steps):
        x = data[step * batch : (step + 1) * batch]
        loss = model(input_ids=x, labels=x).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if on_step is not None:
            on_step(f"training step {step + 1}/{steps}")
    model.train_loss = loss.item()
    return model.eval()
