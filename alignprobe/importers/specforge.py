"""SpecForge's offline hidden states, and the legacy EAGLE ``ge_data`` files that share their shape.

Read from SpecForge's source (sgl-project/SpecForge a6b6b02, 2026-08-08):
- scripts/prepare_hidden_states.py writes one ``torch.save`` dict a sample to
  ``{out}/rows_{g}-{g+2000}/data_{idx}.ckpt`` (``.ckpt.gz`` with --compress), keys ``input_ids [S]``,
  ``loss_mask [S]``, ``aux_hidden_state [1, S, 3H]``, ``hidden_state [1, S, H]`` (the final state
  SGLang returns: post-norm), in the model's dtype.
- Rows come from a batch padded by DataCollatorWithPadding (specforge/data/utils.py): zeros appended
  to input_ids and loss_mask, and the padded row is run through the model whole, so a file's tail may
  be pad tokens (id 0, loss_mask 0) with states of their own. The importer drops that tail.
- The online layout (specforge/algorithms/eagle3/providers.py) names the aux concat ``hidden_state``
  and the final state ``target``: the same key means another tensor. Both layouts are read.

Legacy EAGLE-1/2 (SafeAILab/EAGLE bfeb532, eagle/ge_data/ge_data_all_*.py): ``{outdir}/{index}/data_{i}.ckpt``
dicts of ``input_ids [S]``, ``hidden_state [S, H]`` (``hidden_states[-1]``, post-norm) and ``loss_mask [S]``,
one sample a file, no padding.
"""

from __future__ import annotations

import os

import numpy as np
import torch

from alignprobe.errors import BadInput
from alignprobe.dump.schema import FINAL_NORM_POST
from alignprobe.importers.files import file_index, load_torch_dict, numbered_files
from alignprobe.importers.layout import Layout, SampleRef
from alignprobe.importers.sample import ForeignSample, as_states, as_token_ids

SUFFIXES = (".ckpt", ".ckpt.gz")
PAD_TOKEN = 0  # what DataCollatorWithPadding fills input_ids with


def list_files(root: str) -> list[str]:
    """Every ``data_<idx>.ckpt[.gz]`` under ``root`` (or ``root`` itself), by sample index."""
    return numbered_files(root, "data_", SUFFIXES)


def layout_of(keys) -> str:
    """``specforge`` (offline keys), ``specforge-online``, ``eagle`` (ge_data) or ``unknown``."""
    keys = set(keys)
    if "aux_hidden_state" in keys:
        return "specforge"
    if "target" in keys and "hidden_state" in keys:
        return "specforge-online"
    if "hidden_state" in keys and "input_ids" in keys:
        return "eagle"
    return "unknown"


def read(path: str, expected_layout: str, mmap: bool = True, strict: bool = True) -> ForeignSample:
    """One file of ``expected_layout`` (``specforge`` covers both SpecForge layouts).

    ``strict=False`` is the audit's read: it takes what an import refuses but a scan can still judge
    (a file of the other family, states whose rows differ from the tokens, aux states that are not a
    multiple of the final state's width, a loss_mask that is not a tensor: dropped), so the checks
    report it; what cannot be scanned at all is refused in either mode."""
    data = load_torch_dict(path, mmap=mmap)
    layout = layout_of(data)
    family = "eagle" if layout == "eagle" else "specforge" if layout.startswith("specforge") else layout
    if not strict and (layout == "unknown" or "input_ids" not in data):
        raise BadInput(f"{path}: keys {sorted(data)} are neither SpecForge's nor EAGLE ge_data's")
    if strict and family != expected_layout:
        raise BadInput(
            f"{path}: keys {sorted(data)} are not a {expected_layout} hidden-state file "
            f"({_expected_keys(expected_layout)})"
        )
    if "input_ids" not in data:
        raise BadInput(f"{path}: no input_ids (keys: {sorted(data)})")
    tokens = as_token_ids(data["input_ids"], path, "input_ids")
    loss_mask = None
    mask = data.get("loss_mask")
    if strict and mask is not None and not isinstance(mask, torch.Tensor):
        raise BadInput(f"{path}: loss_mask is a {type(mask).__name__}, expected a tensor")
    if isinstance(mask, torch.Tensor):
        loss_mask = as_token_ids(mask.ne(0), path, "loss_mask")  # 0/1 of any dtype (EAGLE variants use float)
        if len(loss_mask) != len(tokens):  # (the audit's padding and coverage checks pair them token by token)
            raise BadInput(f"{path}: loss_mask holds {len(loss_mask)} tokens but input_ids holds {len(tokens)}")
    rows = len(tokens) if strict else None
    aux = final = None
    if layout == "specforge":
        aux = as_states(data["aux_hidden_state"], path, "aux_hidden_state", rows, 2)
        if "hidden_state" in data:
            final = as_states(data["hidden_state"], path, "hidden_state", rows, 2)
    elif layout == "specforge-online":
        aux = as_states(data["hidden_state"], path, "hidden_state (online layout: the aux concat)", rows, 2)
        final = as_states(data["target"], path, "target", rows, 2)
    else:
        final = as_states(data["hidden_state"], path, "hidden_state", rows, 2)
    empty = next((t for t in (aux, final) if t is not None and len(t) == 0), None)
    if not strict and empty is not None:  # (strict: the token count says so)
        raise BadInput(f"{path}: a state has shape {tuple(empty.shape)}: no rows, a sample with no tokens")
    hidden = int(final.shape[-1]) if final is not None else None
    if strict and aux is not None and hidden is not None and aux.shape[-1] % hidden:
        raise BadInput(f"{path}: the aux states are {aux.shape[-1]} wide, not a multiple of the final state's {hidden}")
    return ForeignSample(path, file_index(path), tokens, loss_mask, aux, final, hidden, layout=layout)


def read_tokens(path: str) -> tuple[np.ndarray, np.ndarray | None]:
    """Only ``input_ids`` and ``loss_mask`` (0/1) of a file: a mapped load reads just their bytes (a
    ``.ckpt.gz`` is decompressed whole: gzip cannot seek)."""
    data = load_torch_dict(path)
    if "input_ids" not in data:
        raise BadInput(f"{path}: no input_ids (keys: {sorted(data)})")
    tokens = as_token_ids(data["input_ids"], path, "input_ids")
    mask = data.get("loss_mask")
    return tokens, as_token_ids(mask.ne(0), path, "loss_mask") if isinstance(mask, torch.Tensor) else None


def padding_length(sample: ForeignSample) -> int:
    """Tokens of right padding at the end: the trailing run of pad id 0 with loss_mask 0."""
    return padding_of(sample.token_ids, sample.loss_mask)


def padding_of(token_ids: np.ndarray, loss_mask: np.ndarray | None) -> int:
    if loss_mask is None or len(loss_mask) != len(token_ids):
        return 0
    pad = (token_ids == PAD_TOKEN) & (loss_mask == 0)
    count = 0
    for is_pad in pad[::-1]:
        if not is_pad:
            break
        count += 1
    return count


def _expected_keys(layout: str) -> str:
    if layout == "eagle":
        return "expected input_ids, hidden_state, loss_mask"
    return "expected input_ids, loss_mask, aux_hidden_state, hidden_state (or online: hidden_state, target)"


class _CheckpointLayout(Layout):
    """``data_<idx>.ckpt[.gz]`` files, one sample each; SpecForge and EAGLE ge_data share the names,
    so the first file's keys tell which."""

    needs_keys = True
    mappable = True
    final_norm = FINAL_NORM_POST  # SGLang's (SpecForge) and HF's hidden_states[-1] (ge_data): post-norm

    def files(self, path: str) -> list[str]:
        return list_files(path) if os.path.isdir(path) or path.endswith(SUFFIXES) else []

    def read(self, ref: SampleRef, mmap: bool = True, strict: bool = True) -> ForeignSample:
        return read(ref.path, self.name, mmap=mmap, strict=strict)

    def read_tokens(self, ref: SampleRef):
        return read_tokens(ref.path)


class SpecForgeLayout(_CheckpointLayout):
    name = "specforge"
    described = "SpecForge data_*.ckpt"
    pads_right = True

    def accepts(self, found) -> bool:
        return found is not None and not found.records and layout_of(found.keys).startswith("specforge")


class EagleLayout(_CheckpointLayout):
    name = "eagle"
    described = "EAGLE ge_data data_*.ckpt"

    def accepts(self, found) -> bool:
        return found is not None and not found.records and layout_of(found.keys) == "eagle"


SPECFORGE_LAYOUT = SpecForgeLayout()
EAGLE_LAYOUT = EagleLayout()
