"""Read a unit's samples leniently: what the importer refuses (rows that do not match the tokens, a
damaged file) the audit reports as a finding, and reads on.

Foreign files are opened with the importers' safe loaders (``torch.load(weights_only=True)``,
safetensors), speculators FP8 states are dequantized the importer's way, and SpecForge's padding
tail is measured, not dropped: the padding check wants to see it.
"""

from __future__ import annotations

import os
import contextlib
from typing import Iterator

import numpy as np
import torch

from alignprobe.audit.readahead import ReadAhead, Window
from alignprobe.audit.sample import AuditSample
from alignprobe.audit.units import Unit
from alignprobe.errors import BadInput


class Unreadable(Exception):
    """A file of the unit could not be read; the audit counts it and goes on."""

    def __init__(self, path: str, reason: str):
        super().__init__(reason)
        self.path, self.reason = path, reason


def iter_samples(unit: Unit, ahead: Window | None = None) -> Iterator[AuditSample | Unreadable]:
    """The unit's samples in file order; an unreadable file yields an :class:`Unreadable` in its place.
    ``ahead``: a read-ahead shared with the units scanned after this one (else one for this unit)."""
    if unit.format == "dump":
        yield from _dump_samples(unit)
        return
    with (contextlib.nullcontext(ahead) if ahead is not None else ReadAhead(unit.files)) as ahead:
        for i, path in enumerate(unit.files):
            ahead.ready(i)  # in the page cache now; the next files are being read while this one is scanned
            try:
                yield _foreign_sample(unit, path)
            except BadInput as exc:
                yield Unreadable(path, str(exc))


def _name(unit: Unit, path: str) -> str:
    return os.path.relpath(path, unit.source) if os.path.isdir(unit.source) else os.path.basename(path)


def _foreign_sample(unit: Unit, path: str) -> AuditSample:
    from alignprobe.importers import specforge, speculators
    from alignprobe.importers.files import SafetensorsFile, load_torch_dict
    from alignprobe.importers.sample import as_token_ids

    name = _name(unit, path)
    if unit.format == "speculators":
        f = SafetensorsFile(path)
        missing = {"token_ids", "hidden_states"} - f.keys
        if missing:
            raise BadInput(f"{path}: missing {', '.join(sorted(missing))}")
        tokens = as_token_ids(f.tensor("token_ids"), path, "token_ids")
        scales = f.tensor(speculators.SCALES_KEY) if speculators.SCALES_KEY in f.keys else None
        raw = f.tensor("hidden_states")
        rows = raw.shape[0] if raw.ndim == 3 else -1
        states = speculators.dequantized(raw, scales, path, rows) if scales is not None else raw
        states = _as_3d(states, path, "hidden_states")
        labels = [f"slice[{j}]" for j in range(states.shape[1])]
        sample = AuditSample(name, unit.source, tokens, None, {"hidden_states": states}, {"hidden_states": labels})
        _speculators_mask(sample, path)
        return sample

    data = load_torch_dict(path, mmap=True)  # mapped from the page cache ReadAhead filled: no copy
    layout = specforge.layout_of(data)
    if layout == "unknown" or "input_ids" not in data:
        raise BadInput(f"{path}: keys {sorted(data)} are neither SpecForge's nor EAGLE ge_data's")
    tokens = as_token_ids(data["input_ids"], path, "input_ids")
    mask = None
    if "loss_mask" in data and isinstance(data["loss_mask"], torch.Tensor):
        mask = as_token_ids(data["loss_mask"].ne(0), path, "loss_mask")
        if len(mask) != len(tokens):  # the padding and coverage checks pair them token by token
            raise BadInput(f"{path}: loss_mask holds {len(mask)} tokens but input_ids holds {len(tokens)}")
    keys = {"specforge": {"aux": "aux_hidden_state", "final": "hidden_state"},
            "specforge-online": {"aux": "hidden_state", "final": "target"},
            "eagle": {"final": "hidden_state"}}[layout]
    states, labels = {}, {}
    final = _as_2d(data[keys["final"]], path, keys["final"]) if keys["final"] in data else None
    hidden = final.shape[-1] if final is not None else None
    if "aux" in keys:
        aux = _as_2d(data[keys["aux"]], path, keys["aux"])
        if hidden is None or aux.shape[-1] % hidden:
            hidden = aux.shape[-1] // 3 if aux.shape[-1] % 3 == 0 else aux.shape[-1]
        states["aux"] = aux.reshape(aux.shape[0], -1, hidden)
        labels["aux"] = [f"aux[{j}]" for j in range(states["aux"].shape[1])]
    if final is not None:
        states["final"] = final.reshape(final.shape[0], 1, -1)
        labels["final"] = ["final"]
    sample = AuditSample(name, unit.source, tokens, mask, states, labels)
    if layout != "eagle" and mask is not None:
        sample.padding = _padding_length(tokens, mask)
    if mask is None:
        sample.mask_missing = (f"{unit.source}: its {layout} files hold no loss_mask, so loss-mask coverage, "
                               "empty masks and padding are not checked there")
    return sample


def _speculators_mask(sample: AuditSample, path: str) -> None:
    """The loss mask from prepare-data's dataset row (speculators_dataset.py says where it lives).
    States past the row's input_ids, the ids otherwise equal, are padding that was written."""
    import alignprobe.audit.speculators_dataset as speculators_dataset

    try:
        ids, mask = speculators_dataset.row_of(path, sample.source)
    except speculators_dataset.Missing as missing:
        sample.mask_missing = str(missing)
        return
    tokens = sample.token_ids
    if len(tokens) < len(ids) or not np.array_equal(tokens[: len(ids)], ids) or len(mask) != len(ids):
        sample.dataset_mismatch = (len(ids), len(tokens))
        return
    sample.padding = len(tokens) - len(ids)
    sample.loss_mask = np.concatenate([(mask != 0).astype(np.int64), np.zeros(sample.padding, dtype=np.int64)])
    if sample.padding:
        sample.dataset_mismatch = (len(ids), len(tokens))


def _padding_length(tokens: np.ndarray, mask: np.ndarray) -> int:
    from alignprobe.importers.specforge import PAD_TOKEN

    pad = (tokens == PAD_TOKEN) & (mask == 0)
    not_pad = np.flatnonzero(~pad)
    return int(len(tokens) - (not_pad[-1] + 1 if len(not_pad) else 0))


def _as_2d(value, path: str, key: str) -> torch.Tensor:
    if not isinstance(value, torch.Tensor) or not value.is_floating_point():
        raise BadInput(f"{path}: {key} is not a floating-point tensor")
    if value.ndim == 3 and value.shape[0] == 1:
        value = value[0]
    if value.ndim != 2:
        raise BadInput(f"{path}: {key} has shape {tuple(value.shape)}; expected [S, W] (plus a batch of 1)")
    if value.shape[1] == 0:
        raise BadInput(f"{path}: {key} has shape {tuple(value.shape)}: a state with no channels")
    if value.shape[0] == 0:  # its slices cannot be told from its width by a reshape of no rows
        raise BadInput(f"{path}: {key} has shape {tuple(value.shape)}: no rows, a sample with no tokens")
    return value


def _as_3d(value, path: str, key: str) -> torch.Tensor:
    if not isinstance(value, torch.Tensor) or not value.is_floating_point():
        raise BadInput(f"{path}: {key} is {getattr(value, 'dtype', type(value).__name__)}, not floating-point states")
    if value.ndim != 3:
        raise BadInput(f"{path}: {key} has shape {tuple(value.shape)}; expected [S, L, H]")
    if 0 in value.shape[1:]:
        raise BadInput(f"{path}: {key} has shape {tuple(value.shape)}: no slices or no channels")
    return value


def _dump_samples(unit: Unit) -> Iterator[AuditSample]:
    from alignprobe.dump import open_dump

    with open_dump(unit.source) as dump:
        claims = dump.streams
        labels = {name: [c.slice_label(j) for j in range(len(c.hf_indices))] for name, c in claims.items()}
        engine = str(dump.provenance.engine or "")
        for i in range(unit.first, unit.stop):
            a, b = dump.span(i)  # one sample at a time: memory stays one sample's states, widened
            mark = dump.mark(i)
            # a short sample's rows outside those returned are NaN placeholders, not states: read only
            # the returned ones, so the checks never count a placeholder as a NaN the engine produced
            returned = mark.returned if mark.short else None
            lo, hi = (a + returned[0], a + returned[1]) if returned else (a, b)
            states = {name: torch.from_numpy(dump.read(name, lo, hi)).reshape(hi - lo, len(c.hf_indices), c.hidden_size)
                      for name, c in claims.items()}
            yield AuditSample(f"{os.path.basename(unit.source)}#{dump.sample_ids[i]}", unit.source,
                              np.asarray(dump.token_ids(i), dtype=np.int64), None, states, labels,
                              mask_missing=f"{unit.source}: alignprobe dumps keep no loss mask, so loss-mask coverage, "
                                           "empty masks and padding are not checked there",
                              returned=returned, engine=engine)
