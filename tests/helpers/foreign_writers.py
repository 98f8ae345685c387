"""The trained tiny target and `capture hf` of its prompts that the foreign-layout tests write their
files from: each test writes what its producer writes for these prompts, and compares against this."""

from __future__ import annotations

import copy
import functools

import torch

N, H = 8, 32
PROMPTS = 6


@functools.lru_cache(maxsize=None)
def model_and_prompts():
    from alignprobe.demo.scenarios import scenario_prompts
    from alignprobe.demo.tiny_models import tiny_llama, train_briefly

    model = train_briefly(tiny_llama(num_layers=N, hidden_size=H, seed=0), steps=20, batch=8, length=32)
    return model, scenario_prompts(PROMPTS, 1)


def hf_states(tokens) -> tuple[torch.Tensor, ...]:
    """HF's hidden_states tuple for one prompt (HF[0] .. HF[N], the last post-norm), batch of one."""
    model, _ = model_and_prompts()
    with torch.no_grad():
        return model(input_ids=torch.tensor([tokens]), output_hidden_states=True).hidden_states


def capture_serve(folder) -> str:
    """`capture hf` of the prompts (float32): the serve side every foreign train side is compared with."""
    from alignprobe.probes.hf import capture_hf

    model, prompts = model_and_prompts()
    path = str(folder / "serve.h5")
    capture_hf(copy.deepcopy(model), prompts, path, batch_size=1, dtype="float32", progress=False)
    return path
