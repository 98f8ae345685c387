"""Foreign training-set folders written in their systems' real layouts from a tiny model, and what
the importer tests check them with.

The writers follow each system's own code (see alignprobe/importers/*.py for the sources): SpecForge
pads a batch with zeros and runs each padded row whole, its aux ids [1, N//2-1, N-4] are layer outputs
= HF[k+1], ``hidden_state`` is post-norm; speculators stacks vLLM's HF[k] for [2, N//2, N-3] and the
pre-norm final; ge_data stores ``hidden_states[-1]`` unbatched.
"""

from __future__ import annotations

import gzip
import hashlib
import os

import numpy as np
import torch
from safetensors.torch import save_file

from alignprobe.compare import compare
from alignprobe.dump import open_dump

N = 8  # tiny target: SpecForge default ids [1, 3, 4] -> HF[2, 4, 5] = the EAGLE-3 view (2, N//2, N-3)
SPECFORGE_IDS = [1, N // 2 - 1, N - 4]
VLLM_IDS = [2, N // 2, N - 3, N]


def forward(model, rows: torch.Tensor):
    """HF states and the pre-norm final of unmasked rows (a hook of our own, independent of the probe)."""
    kept = {}
    hook = model.model.norm.register_forward_hook(lambda _m, inp, _o: kept.__setitem__("pre", inp[0]) or None)
    try:
        with torch.no_grad():
            out = model(input_ids=rows, output_hidden_states=True)
    finally:
        hook.remove()
    return out.hidden_states, kept["pre"]


def write_specforge(root, model, token_lists, layer_ids=SPECFORGE_IDS, *, online=False, gz_every=3, batch=4):
    """SpecForge's prepare_hidden_states: batches padded with 0, each padded row run whole."""
    for start in range(0, len(token_lists), batch):
        group = token_lists[start : start + batch]
        width = max(len(t) for t in group)
        rows = torch.zeros(len(group), width, dtype=torch.long)
        loss = torch.zeros(len(group), width, dtype=torch.long)
        for r, t in enumerate(group):
            rows[r, : len(t)] = torch.tensor(t)
            loss[r, 1 : len(t)] = 1  # any mask; the tail past the sample stays 0 like the collator's padding
        hs, _ = forward(model, rows)
        for r in range(len(group)):
            idx = start + r
            aux = torch.cat([hs[k + 1][r] for k in layer_ids], dim=-1).unsqueeze(0)  # output of layer k
            final = hs[-1][r].unsqueeze(0)  # post-norm, as SGLang returns it
            record = {"input_ids": rows[r].clone(), "loss_mask": loss[r].clone()}
            record.update({"hidden_state": aux, "target": final} if online else {"aux_hidden_state": aux, "hidden_state": final})
            save_specforge_record(root, idx, record, gz_every)
    return str(root)


def save_specforge_record(root, idx: int, record: dict, gz_every: int = 0) -> None:
    """One sample where SpecForge keeps it: rows_<k*2000>-<k*2000+2000>/data_<idx>.ckpt, every
    ``gz_every``-th one gzipped (.ckpt.gz)."""
    folder = os.path.join(root, f"rows_{idx // 2000 * 2000}-{idx // 2000 * 2000 + 2000}")
    os.makedirs(folder, exist_ok=True)
    if gz_every and idx % gz_every == 0:
        with gzip.open(os.path.join(folder, f"data_{idx}.ckpt.gz"), "wb") as fh:
            torch.save(record, fh)
    else:
        torch.save(record, os.path.join(folder, f"data_{idx}.ckpt"))


def write_speculators(root, model, token_lists, layer_ids=VLLM_IDS):
    os.makedirs(root, exist_ok=True)
    for idx, t in enumerate(token_lists):
        hs, pre = forward(model, torch.tensor([t]))
        slices = [pre[0] if k == N else hs[k][0] for k in layer_ids]  # vLLM: id k = HF[k], id N = pre-norm
        save_file({"hidden_states": torch.stack(slices, dim=1).contiguous(), "token_ids": torch.tensor(t)},
                  os.path.join(root, f"hs_{idx}.safetensors"))
    return str(root)


def write_ge_data(root, model, token_lists):
    folder = os.path.join(root, "0")
    os.makedirs(folder, exist_ok=True)
    for idx, t in enumerate(token_lists):
        hs, _ = forward(model, torch.tensor([t]))
        torch.save({"input_ids": torch.tensor(t), "hidden_state": hs[-1][0], "loss_mask": torch.ones(len(t))},
                   os.path.join(folder, f"data_{idx}.ckpt"))
    return str(root)


def write_speculators_fp8(root, model, token_lists, layer_ids=VLLM_IDS, scale_shape=(1, 1)):
    """hs-connectors' FP8HiddenStatesConnector: per token, scale = amax / 448 and fp8 = x / scale."""
    os.makedirs(root, exist_ok=True)
    for idx, t in enumerate(token_lists):
        hs, pre = forward(model, torch.tensor([t]))
        states = torch.stack([pre[0] if k == N else hs[k][0] for k in layer_ids], dim=1).float()
        amax = states.abs().amax(dim=(1, 2)).reshape(-1, *scale_shape)
        scale = (amax / torch.finfo(torch.float8_e4m3fn).max).clamp(min=1e-12)
        save_file({"hidden_states": (states / scale.reshape(-1, 1, 1)).to(torch.float8_e4m3fn).contiguous(),
                   "hidden_states_scales": scale.contiguous(), "token_ids": torch.tensor(t)},
                  os.path.join(root, f"hs_{idx}.safetensors"))
    return str(root)


def tree_digest(root):
    digest = hashlib.sha256()
    for folder, _dirs, files in sorted(os.walk(root)):
        for name in sorted(files):
            digest.update(name.encode())
            with open(os.path.join(folder, name), "rb") as fh:
                digest.update(fh.read())
    return digest.hexdigest()


def assert_streams_match(imported, hf, pairs, atol=1e-5):
    """``pairs``: (imported stream, HF stream, HF column slice) compared sample by sample."""
    with open_dump(imported) as a, open_dump(hf) as b:
        assert sorted(a.sample_ids) == sorted(b.sample_ids)
        for sid in b.sample_ids:
            np.testing.assert_array_equal(a.token_ids(sid), b.token_ids(sid))
            for mine, theirs, columns in pairs:
                np.testing.assert_allclose(a.states(sid, mine), b.states(sid, theirs)[:, columns], atol=atol, err_msg=sid)


def verdict(train, serve):
    result = compare(train, serve)
    # an import of the very states capture hf wrote is bit-identical to it: named at info (same_dump)
    return result.verdict, [f"{f.code}: {f.title}" for f in result.findings
                            if not (f.code == "same_dump" and f.severity == "info")]
