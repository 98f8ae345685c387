"""A tiny GGUF for the llama.cpp engine tests, made by the llama.cpp that runs it.

The venv (.ci/engines/install_llamacpp, under $ALIGNPROBE_ENGINE_VENVS as llamacpp/) holds
llama-cpp-python and, in llama.cpp/, the converter of the llama.cpp it vendors. The model is a
briefly trained 8-layer Llama (neighbouring layers told apart) with random norm weights (the
final norm more than a per-token scale, so pre- and post-norm finals differ in direction too),
saved as float32 and converted to an F32 GGUF.

convert_hf_to_gguf.py needs a tokenizer it knows: the tiny byte-level tokenizer.json is a BPE
vocabulary whose pre-tokenizer hash it does not recognise, so a sentencepiece model is trained on a
few lines here (no download) and saved as tokenizer.model, which the converter reads first; it
fills the vocabulary up to the model's 512 ids with unused entries. The captures send token ids,
so no tokenizer is ever run on a prompt.
"""

from __future__ import annotations

import os
import subprocess

NUM_LAYERS, HIDDEN = 8, 64

SENTENCEPIECE = r"""
import io, sys, sentencepiece as spm
lines = [f"tiny model line {i}: the quick brown fox {i % 7} jumps over {i % 5} lazy dogs" for i in range(200)]
model = io.BytesIO()
spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model, vocab_size=96, model_type="bpe",
                               character_coverage=1.0, hard_vocab_limit=False, minloglevel=2)
open(sys.argv[1], "wb").write(model.getvalue())
"""


def save_trained_model(path: str) -> str:
    """The seeded, briefly trained tiny Llama with random norm weights, float32, and its tokenizer."""
    import torch

    from alignprobe.demo.tiny_models import tiny_llama, train_briefly
    from alignprobe.demo.tiny_tokenizer import tiny_tokenizer

    tokenizer = tiny_tokenizer()
    model = tiny_llama(num_layers=NUM_LAYERS, hidden_size=HIDDEN, seed=0, pad_token_id=tokenizer.pad_token_id,
                       bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    train_briefly(model, steps=20, batch=8, length=32)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.copy_(0.5 + torch.rand(param.shape, generator=generator))
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def convert_to_gguf(venv: str, model_dir: str, out: str, log_path: str) -> str:
    """``model_dir`` as an F32 GGUF at ``out``, by the venv's own convert_hf_to_gguf.py."""
    python = os.path.join(venv, "bin", "python")
    converter = os.path.join(venv, "llama.cpp", "convert_hf_to_gguf.py")
    with open(log_path, "wb") as log:
        subprocess.run([python, "-c", SENTENCEPIECE, os.path.join(model_dir, "tokenizer.model")], check=True,
                       stdout=log, stderr=subprocess.STDOUT)
        subprocess.run([python, converter, model_dir, "--outtype", "f32", "--outfile", out], check=True,
                       stdout=log, stderr=subprocess.STDOUT)
    return out


def convert_drafter(venv: str, target_dir: str, layer_ids, path: str, log_path: str, top_level: bool = True) -> str:
    """An untrained EAGLE-3 drafter for ``target_dir`` reading ``layer_ids`` (SpecForge's layout,
    alignprobe.demo.tiny_drafter: the ids in ``eagle_config``), converted to a GGUF at ``path`` by the
    venv's converter. That converter (conversion/llama.py at llama.cpp 0c1e5709) reads only a top-level
    ``eagle_aux_hidden_state_layer_ids``, so ``top_level`` puts the ids there too; without it the GGUF
    gets the converter's default, [2, N//2, N-3]."""
    from transformers import AutoConfig

    from alignprobe.demo.tiny_drafter import drafter_config, init_drafter_weights, save_drafter

    config = drafter_config(AutoConfig.from_pretrained(target_dir), layer_ids)
    if top_level:
        config["eagle_aux_hidden_state_layer_ids"] = list(layer_ids)
    folder = save_drafter(path + ".hf", config, init_drafter_weights(config))
    python = os.path.join(venv, "bin", "python")
    converter = os.path.join(venv, "llama.cpp", "convert_hf_to_gguf.py")
    with open(log_path, "ab") as log:
        subprocess.run([python, converter, folder, "--target-model-dir", target_dir, "--outtype", "f32", "--outfile", path],
                       check=True, stdout=log, stderr=subprocess.STDOUT)
    return path
