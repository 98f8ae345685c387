"""Read a unit's samples leniently: what the importer refuses (rows that do not match the tokens, a
damaged file) the audit reports as a finding, and reads on.

Foreign samples are read by their layout's own reader (importers/registry.py) in its lenient mode
(``strict=False``), so a layout is read in one place; SpecForge's padding tail is measured, not
dropped: the padding check wants to see it. What differs by layout is a hook of its Layout (the name
of a file's own [S, L, H] tensor, a loss mask kept in a dataset beside the files), never a branch here.
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
from alignprobe.importers.layout import DatasetRow


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
    from alignprobe.importers.registry import layout_named

    layout = layout_named(unit.format)
    with (contextlib.nullcontext(ahead) if ahead is not None else ReadAhead(read_ahead_paths(unit))) as ahead:
        for i, ref in enumerate(unit.samples):
            ahead.ready(i)  # in the page cache now; the next files are being read while this one is scanned
            try:
                yield _foreign_sample(unit, layout, ref)
            except BadInput as exc:
                yield Unreadable(str(ref), str(exc))


def read_ahead_paths(unit: Unit) -> list[str | None]:
    """The file to read into the page cache before each of the unit's samples (None: nothing to read:
    a layout whose files are far larger than a sample)."""
    from alignprobe.importers.registry import layout_named

    whole = layout_named(unit.format).read_ahead
    return [ref.path if whole else None for ref in unit.samples]


def _name(unit: Unit, ref) -> str:
    name = os.path.relpath(ref.path, unit.source) if os.path.isdir(unit.source) else os.path.basename(ref.path)
    return name if ref.record is None else f"{name}[{ref.record}]"


def _foreign_sample(unit: Unit, layout, ref) -> AuditSample:
    from alignprobe.importers import specforge

    read = layout.read(ref, mmap=True, strict=False)  # mapped from the page cache the read-ahead filled: no copy
    states, labels = {}, {}
    if read.aux is not None:
        width = read.aux.shape[-1]
        hidden = read.hidden_size
        if hidden is None or width % hidden:  # the slice-width check reports it; scan it as three slices
            hidden = width // 3 if width % 3 == 0 else width
        # a file of one [S, L, H] tensor is named as it stores it (hs:hidden_states:slice[3])
        stream, label = (layout.stacked, "slice") if layout.stacked else ("aux", "aux")
        states[stream] = read.aux.reshape(read.aux.shape[0], width // hidden, hidden)  # (0 rows: -1 is ambiguous)
        labels[stream] = [f"{label}[{j}]" for j in range(states[stream].shape[1])]
    if read.final is not None:
        states["final"] = read.final.reshape(read.final.shape[0], 1, -1)
        labels["final"] = ["final"]
    sample = AuditSample(_name(unit, ref), unit.source, read.token_ids, read.loss_mask, states, labels)
    if layout.pads_right and read.loss_mask is not None:
        sample.padding = specforge.padding_length(read)
    if read.loss_mask is None:
        row = layout.dataset_row(ref, unit.source)
        if row is None:
            sample.mask_missing = (f"{unit.source}: its {read.layout or layout.name} files hold no loss_mask, so "
                                   "loss-mask coverage, empty masks and padding are not checked there")
        elif row.missing:
            sample.mask_missing = row.missing
        else:
            _mask_from_row(sample, row)
    return sample


def _mask_from_row(sample: AuditSample, row: DatasetRow) -> None:
    """The loss mask from the sample's dataset row (speculators' prepare-data row). States past the row's
    input_ids, the ids otherwise equal, are padding that was written."""
    ids, mask, tokens = row.token_ids, row.loss_mask, sample.token_ids
    if len(tokens) < len(ids) or not np.array_equal(tokens[: len(ids)], ids) or len(mask) != len(ids):
        sample.dataset_mismatch = (len(ids), len(tokens))
        return
    sample.padding = len(tokens) - len(ids)
    sample.loss_mask = np.concatenate([(mask != 0).astype(np.int64), np.zeros(sample.padding, dtype=np.int64)])
    if sample.padding:
        sample.dataset_mismatch = (len(ids), len(tokens))


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
