"""A tiny tokenizer built in code, and a local model directory to capture from, without downloads.

The tokenizer is byte-level: every UTF-8 byte is one token (ids 0..255), so any text encodes and
no merges are needed; a handful of special tokens follow, and a small chat template marks roles
with them. It fits the tiny models' 512-token vocabulary (alignprobe.demo.tiny_models.VOCAB).
"""

from __future__ import annotations

import os

SPECIAL_TOKENS = ("<|pad|>", "<|bos|>", "<|eos|>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>")

CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}<|{{ message['role'] }}|>{{ message['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)

ARCHS = ("deepseek_v3", "llama")


def tiny_tokenizer():
    """A ``PreTrainedTokenizerFast``: 256 byte tokens, then the special tokens, with a chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    byte_chars = pre_tokenizers.ByteLevel.alphabet()
    # Order the byte alphabet by the byte each char stands for, so token id == byte value.
    vocab = {char: _byte_of(char) for char in byte_chars}
    for offset, token in enumerate(SPECIAL_TOKENS):
        vocab[token] = 256 + offset
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens(list(SPECIAL_TOKENS))
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="<|pad|>",
        bos_token="<|bos|>",
        eos_token="<|eos|>",
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def save_tiny_model_dir(
    path: str | os.PathLike,
    arch: str = "deepseek_v3",
    *,
    num_layers: int | None = None,
    hidden_size: int = 64,
    seed: int = 0,
    train_steps: int = 0,
) -> str:
    """Save a seeded tiny model and :func:`tiny_tokenizer` as a local model directory; returns its path.

    ``train_steps`` > 0 fits the model briefly first (alignprobe.demo.tiny_models.train_briefly) so its
    states look trained. ``alignprobe capture hf --model PATH`` then loads it like any checkpoint.
    """
    from alignprobe.demo import tiny_models

    if arch not in ARCHS:
        raise ValueError(f"arch {arch!r} is not one of {ARCHS}")
    build = tiny_models.tiny_deepseek_v3 if arch == "deepseek_v3" else tiny_models.tiny_llama
    kwargs = {"hidden_size": hidden_size, "seed": seed}
    if num_layers is not None:
        kwargs["num_layers"] = num_layers
    tokenizer = tiny_tokenizer()
    model = build(**kwargs, pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                  eos_token_id=tokenizer.eos_token_id)
    if train_steps:
        tiny_models.train_briefly(model, steps=train_steps, seed=seed)
    path = os.fspath(path)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def _byte_of(char: str) -> int:
    """The byte a ByteLevel alphabet char stands for (GPT-2's printable remapping of 0..255)."""
    code = ord(char)
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    if code in printable:
        return code
    # The other bytes were shifted to 256.. in byte order.
    unprintable = [b for b in range(256) if b not in printable]
    return unprintable[code - 256]
