"""``alignprobe demo --keep DIR``: a tiny setup of one's own to try gate, accept, audit and capture on.

The demo's scenarios are dumps; the other commands start from a model folder, prompts, a drafter
and a serving side. This writes all of them, small enough that each command runs in about a minute
on two CPU cores:

    model/         a tiny byte-level Llama trained briefly on a second-order token chain
    prompts.jsonl  input_ids lines drawn from the same chain
    drafter/       an EAGLE-3 drafter trained on the model's own HF[2, N//2, N-3] (SpecForge layout)
    served_hs/     what vLLM's extract_hidden_states connector writes for these prompts: one
                   ``{request}.safetensors`` each (hidden_states [S, L, H], token_ids [S]), made here
                   from the model itself, a stand-in for a server that serves it correctly
    gate.toml      the gate against that folder, outputs in gate-out/

The files stand in for a server: no process is started, so nothing is left running.
"""

from __future__ import annotations

import json
import os

import torch

from alignprobe.conventions import eagle3_hf_indices

NUM_LAYERS, HIDDEN, PROMPTS, LENGTH = 8, 64, 8, 48  # 8 layers: HF[2, 4, 5], three distinct taps


def keep_setup(folder: str | os.PathLike, log=lambda line: None) -> dict[str, str]:
    """Write the setup into ``folder`` (created; must be new or empty); returns name -> path."""
    from safetensors.torch import save_file

    from alignprobe.demo.tiny_drafter import pair_corpus, save_target, train_drafter, train_target
    from alignprobe.probes.hf_states import forward_states

    folder = keep_folder(folder)
    paths = {name: os.path.join(folder, name) for name in ("model", "prompts.jsonl", "drafter", "served_hs", "gate.toml")}
    log("keep: training the tiny target")
    target = train_target(num_layers=NUM_LAYERS, hidden_size=HIDDEN, steps=60, batch=16, length=LENGTH)
    save_target(target, paths["model"])
    log("keep: training the drafter on its states")
    ids = list(eagle3_hf_indices(NUM_LAYERS))
    train_drafter(target, paths["drafter"], steps=30, batch=4, length=LENGTH, layer_ids=ids)
    prompts = pair_corpus(PROMPTS, LENGTH, seed=777)
    with open(paths["prompts.jsonl"], "w") as fh:
        for i, row in enumerate(prompts):
            fh.write(json.dumps({"id": f"p{i}", "input_ids": row.tolist()}) + "\n")
    os.makedirs(paths["served_hs"])
    served_ids = ids + [NUM_LAYERS]  # vLLM numbering: id k is HF[k], id N the last layer's pre-norm output
    for i, row in enumerate(prompts):
        fs = forward_states(target, row[None], keep=ids)
        layers = [fs.hf[k][0] for k in ids] + [fs.final_prenorm[0]]
        save_file({"hidden_states": torch.stack(layers, dim=1).contiguous(), "token_ids": row.clone()},
                  os.path.join(paths["served_hs"], f"req-{i}.safetensors"))
    with open(paths["gate.toml"], "w") as fh:
        fh.write(f'''out = "gate-out"

[train]
model = "model"
prompts = "prompts.jsonl"
dtype = "fp32"

[serve]
vllm_dir = "served_hs"
layer_ids = {served_ids}
''')
    return paths


def keep_folder(folder: str | os.PathLike) -> str:
    """``folder``, made if need be, when it is empty: checked before the demo runs, so a bad --keep
    costs nothing, and nothing of the user's is ever overwritten."""
    from alignprobe.errors import BadInput
    from alignprobe.safe_paths import output_folder

    folder = output_folder(folder, "--keep")
    if os.listdir(folder):
        raise BadInput(f"--keep {folder}: the folder is not empty; give a new one")
    return folder


def try_lines(folder: str) -> str:
    """What to run next, each command on the kept files."""
    return "\n".join([
        f"kept a setup in {folder}/ (model/, prompts.jsonl, drafter/, served_hs/, gate.toml); try, from there:",
        "  alignprobe gate --config gate.toml",
        "  alignprobe capture hf --model model --prompts prompts.jsonl --out train.h5 --dtype fp32 --quiet",
        f"  alignprobe capture vllm --from-dir served_hs --layer-ids {','.join(map(str, list(eagle3_hf_indices(NUM_LAYERS)) + [NUM_LAYERS]))} "
        "--tokens-from train.h5 --out serve.h5",
        "  alignprobe accept --drafter drafter --train-dump train.h5 --serve-dump serve.h5 --target model",
        "  alignprobe audit train.h5",
    ])
