"""Turn a foreign hidden-state dump into ours, one file at a time (bounded memory).

The files say little about themselves: which layer ids the producing run used and the target's
layer count come from the user (or a drafter / target config), and the system's convention
(alignprobe.conventions.map_layer_ids) turns those ids into HF indices. Sample ids are the hash
of the token ids (as a capture of prompts without ids names them), or the ids of a reference dump
whose samples hold the same tokens (``ids_from``), so the import pairs with a capture.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import shutil
from typing import Sequence

import torch

from alignprobe.conventions import default_layer_ids, map_layer_ids
from alignprobe.dump import Provenance, StreamClaim, open_dump
from alignprobe.dump.planned_writer import PlannedDumpWriter
from alignprobe.dump.encoding import dtype_name
from alignprobe.dump.reader import PARTIAL_SUFFIX
from alignprobe.dump.readahead import read_ahead
from alignprobe.dump.schema import ROLE_DRAFTER_INPUT, ROLE_FINAL
from alignprobe.errors import BadInput
from alignprobe.importers.specforge import padding_of
from alignprobe.importers.detect import DUMP, detect_format, sample_refs
from alignprobe.importers.layout import Layout, SampleRef
from alignprobe.importers.files import is_mapped_checkpoint, read_through
from alignprobe.layer_ids import infer_num_layers, layer_ids_from_config, num_layers_from_config
from alignprobe.importers.sample import ForeignSample
from alignprobe.probes.prompts import ContentIds, token_sample_id


READ_AHEAD_BYTES = 256 << 20  # file bytes read ahead of the one being written
NO_FLUSH = 1 << 62  # the writer's flush_tokens when it flushes only at the end


@dataclasses.dataclass
class ImportPlan:
    """What the files will become: the claims, and how the layer ids were arrived at."""

    layout: Layout
    samples: list[SampleRef]  # every sample, in order (a file, or a record of one)
    num_layers: int
    hidden_size: int
    layer_ids: tuple[int, ...]
    hf_indices: tuple[int, ...]
    rule: str
    streams: dict[str, StreamClaim]
    aux_slices: int  # slices of the file's aux tensor that go to the aux stream (the rest is the final state)
    file_width: int  # width of the file's layer states (every file must match the first)
    notes: list[str]
    storage: str = ""  # the stored dtype where it differs from the imported one (speculators FP8)
    final_from_tail: bool = False  # the final stream is the aux tensor's slices after ``aux_slices``
    system: str = ""  # the convention the ids were read in (conventions.SYSTEMS): a Model-Optimizer backend

    @property
    def format(self) -> str:
        return self.layout.name

    @property
    def files(self) -> list[str]:
        """The distinct files behind the samples, in order."""
        return list(dict.fromkeys(ref.path for ref in self.samples))


@dataclasses.dataclass
class ImportResult:
    """What an import wrote."""

    path: str
    plan: ImportPlan
    samples: int
    tokens: int
    padded_samples: int  # samples whose right padding was dropped
    padding_tokens: int
    matched_ids: int | None  # samples named after the reference dump (None without ids_from)

    def summary(self) -> str:
        p = self.plan
        lines = [
            f"wrote {self.path}: {self.samples} samples, {self.tokens} tokens from {len(p.files)} {p.format} files",
            f"  layer ids {list(p.layer_ids)} -> HF {list(p.hf_indices)}  ({p.rule})" if p.layer_ids else "",
        ]
        for name, claim in p.streams.items():
            labels = ", ".join(claim.slice_label(j) for j in range(len(claim.hf_indices)))
            lines.append(f"  stream {name!r} ({claim.role}): {labels}, {claim.dtype}")
        if self.padded_samples:
            lines.append(f"  dropped right padding: {self.padding_tokens} tokens from {self.padded_samples} samples")
        if self.matched_ids is not None:
            lines.append(f"  sample ids: {self.matched_ids} of {self.samples} matched the reference dump by tokens")
        lines += [f"  note: {n}" for n in p.notes]
        return "\n".join(line for line in lines if line)


def plan_import(
    source: str | os.PathLike,
    *,
    system: str | None = None,
    layer_ids: Sequence[int] | None = None,
    config: str | os.PathLike | None = None,
    num_layers: int | None = None,
    target_config: str | os.PathLike | None = None,
) -> ImportPlan:
    """Read the first sample and the user's facts; decide every stream's claim. Writes nothing."""
    source = os.fspath(source)
    if os.path.isfile(source) and detect_format(source) == DUMP:
        raise BadInput(f"{source}: an HDF5 file; alignprobe dumps are read as they are, and no importer reads other HDF5")
    layout, refs = sample_refs(source)
    told_backend = system is not None and system.lower() != layout.name
    if told_backend and system.lower() not in layout.aliases:
        raise BadInput(f"{source}: the files are {layout.name} files, not {system}: drop --system or point at the right folder")
    first = read_sample(layout, refs[0])
    convention = layout.convention(first, system)
    notes: list[str] = []
    ids, ids_source = _given_ids(layer_ids, config, layout)
    stored = layout.stored_ids(source)
    if stored is not None and ids is not None and list(ids) != stored:
        raise BadInput(f"{source}: the files record layer ids {stored}, but {ids} were given: drop the ids "
                       "(the files say which they hold)")
    if stored is not None:
        ids, ids_source = list(stored), f"from the {layout.name} files"
    hidden = first.hidden_size
    if hidden is None:
        if ids is None:
            raise BadInput(f"{refs[0]}: no final hidden_state to take H from: give --layer-ids so H = width / count")
        hidden = first.aux.shape[-1] // len(ids)
        if hidden * len(ids) != first.aux.shape[-1]:
            raise BadInput(f"{refs[0]}: the aux states are {first.aux.shape[-1]} wide, not {len(ids)} equal slices")
    slices = first.aux.shape[-1] // hidden if first.aux is not None else 0
    n, how = _num_layers(convention, ids, slices, num_layers, target_config)
    if how:
        notes.append(how)

    if first.aux is None:  # the final state alone (EAGLE ge_data; a SaveState run capturing only -1)
        if ids is not None:
            notes.append(f"the {layout.name} files hold only the final state: the layer ids were not needed")
        final = _claim(first.final, (n,), hidden, n, layout.final_norm, ROLE_FINAL,
                       f"{layout.name} final state: HF[-1], {layout.final_norm}")
        return ImportPlan(layout, refs, n, hidden, (), (), "", {"final": final}, 0, 0, notes)

    given = ids is not None
    if ids is None and not layout.has_default_ids:
        raise BadInput(f"{refs[0]}: {layout.described} files do not hold their layer ids: give the ids the run "
                       "used with --layer-ids")
    if ids is None:
        ids = list(default_layer_ids(convention, n))
        ids_source = "default"
        notes.append(f"no layer ids given: assumed {convention}'s default {ids} for N={n}")
    fit = layout.fit_ids(list(ids), slices, n, given)
    ids = fit.ids
    notes += fit.notes
    if len(ids) != slices and not (fit.tail_final_norm and len(ids) == fit.aux_slices):
        said = f"{len(ids)} layer ids were given ({ids})" if given else (
            f"no layer ids were given and {convention}'s default for N={n} is {len(ids)} ids ({ids})")
        raise BadInput(
            f"{refs[0]}: the file holds {slices} layer slices of hidden size {hidden}, "
            f"but {said}: give one id per slice with --layer-ids"
        )
    if first.storage:
        notes.append(layout.storage_note(first.storage))
    streams: dict[str, StreamClaim] = {}
    mapping = map_layer_ids(convention, ids, n)
    if fit.aux_slices:
        streams["aux"] = _claim(first.aux, mapping.hf_indices[: fit.aux_slices], hidden, n, mapping.final_norm,
                                ROLE_DRAFTER_INPUT, f"{convention} layer ids {ids[: fit.aux_slices]} ({ids_source}): "
                                f"{mapping.rule}")
    if fit.tail_final_norm:
        streams["final"] = _claim(first.aux, (n,), hidden, n, fit.tail_final_norm, ROLE_FINAL,
                                  f"{layout.name} aux slice {fit.aux_slices}: the final state, {fit.tail_final_norm}")
    elif first.final is not None:
        norm = layout.final_norm_of(mapping.final_norm)
        streams["final"] = _claim(first.final, (n,), hidden, n, norm, ROLE_FINAL,
                                  f"{layout.name} final state ({convention}): {norm}")
    if convention != layout.name:
        told = "as given" if told_backend else "told from how the files store the final state"
        notes.append(f"{layout.name} files numbered as {convention} ({told})")
    return ImportPlan(layout, refs, n, hidden, tuple(ids), tuple(mapping.hf_indices), mapping.rule, streams,
                      fit.aux_slices, slices * hidden, notes, first.storage, bool(fit.tail_final_norm),
                      system=convention)


def import_source(
    source: str | os.PathLike,
    out_path: str | os.PathLike,
    *,
    system: str | None = None,
    layer_ids: Sequence[int] | None = None,
    config: str | os.PathLike | None = None,
    num_layers: int | None = None,
    target_config: str | os.PathLike | None = None,
    ids_from: str | os.PathLike | None = None,
    overwrite: bool = False,
    progress: bool = True,
    shard_tokens: int | None = None,
) -> ImportResult:
    """Import a foreign dump (SpecForge, speculators or EAGLE ge_data) into the dump ``out_path``.

    ``shard_tokens``: tokens between two fsyncs; by default none until the end (an import is redone,
    never resumed, so a periodic fsync only stalls it), the pages queued for the disk as they are
    written (dump/write_behind.py) so the final fsync waits for little."""
    plan = plan_import(source, system=system, layer_ids=layer_ids, config=config, num_layers=num_layers,
                       target_config=target_config)
    names = SampleNames(ids_from)
    provenance = provenance_of(plan, source, target_config)
    partial = os.fspath(out_path) + PARTIAL_SUFFIX
    if os.path.isdir(partial):
        raise BadInput(f"{partial}/ is left from an unfinished run: delete it, or choose another output path")
    # Two passes: the token ids first (a few bytes a file), so every sample's id and length are known
    # and the dump is written in place, each state byte read once and written once (DumpWriter's
    # shards and merge wrote it twice and read it back: 0.39x of a raw read, issue 15).
    planned = plan_samples(plan, names, progress)
    writer = PlannedDumpWriter(out_path, provenance, plan.streams, [(sid, length) for sid, length, _ in planned],
                               overwrite=overwrite, flush_tokens=shard_tokens or NO_FLUSH,
                               write_behind=shard_tokens is None)
    try:
        counts = _write_all(plan, planned, writer, progress)
    except BaseException:
        writer.abandon()
        shutil.rmtree(partial, ignore_errors=True)  # an import is redone from scratch, never resumed
        raise
    writer.finish()
    return ImportResult(os.fspath(out_path), plan, len(plan.samples), *counts, names.matched)


def provenance_of(plan: ImportPlan, source, target_config) -> Provenance:
    """What an import of ``source`` records about where its states came from."""
    return Provenance.here(
        engine=plan.format,
        model=os.fspath(target_config) if target_config else "",
        dtype=next(iter(plan.streams.values())).dtype,
        capture={
            "imported_from": os.path.abspath(os.fspath(source)),
            "format": plan.format,
            **({"system": plan.system} if plan.system else {}),
            "files": len(plan.files),
            "layer_ids": list(plan.layer_ids),
            "hf_indices": list(plan.hf_indices),
            "rule": plan.rule,
            "num_layers": plan.num_layers,
            "notes": plan.notes,
            **({"states_storage": plan.storage} if plan.storage else {}),
        },
    )


def read_sample(layout: Layout, ref: SampleRef, mmap: bool = True) -> ForeignSample:
    sample = layout.read(ref, mmap=mmap)
    if len(sample.token_ids) == 0:
        raise BadInput(f"{ref}: holds no tokens (its token ids are empty); remove the file or capture it again")
    return sample


# -- plumbing ------------------------------------------------------------------------------------


def plan_samples(plan: ImportPlan, names: "SampleNames", progress: bool,
                 kept_tokens: list | None = None) -> list[tuple[str, int, int]]:
    """``(sample id, length kept, padding dropped)`` of every file, from its token ids alone; the kept
    token ids of each file are appended to ``kept_tokens`` when it is given."""
    from tqdm.auto import tqdm

    out, seen = [], {}
    for ref in tqdm(plan.samples, desc=f"plan {plan.format}", unit="sample", disable=not progress):
        tokens, mask = plan.layout.read_tokens(ref)
        pad = padding_of(tokens, mask) if plan.layout.pads_right else 0
        sample_id, pad = names.name(tokens.tolist(), pad)
        if len(tokens) == 0:
            raise BadInput(f"{ref}: holds no tokens (its token ids are empty); remove the file or capture it again")
        if pad >= len(tokens):
            raise BadInput(f"{ref}: every token is padding (loss_mask is 0 throughout); remove the file or capture it again")
        if sample_id in seen:
            raise BadInput(f"{ref}: sample id {sample_id!r} was already taken by {seen[sample_id]} (the same tokens twice?)")
        seen[sample_id] = ref
        out.append((sample_id, len(tokens) - pad, pad))
        if kept_tokens is not None:
            kept_tokens.append(tokens[: len(tokens) - pad])
    return out


def _write_all(plan: ImportPlan, planned, writer: PlannedDumpWriter, progress: bool) -> tuple[int, int, int]:
    """Every file into its place, one at a time; returns (tokens, padded samples, padding tokens)."""
    from tqdm.auto import tqdm

    tokens = padded = padding_tokens = 0
    jobs = list(zip(plan.samples, planned))
    sizes = [ref.size for ref in plan.samples]
    # The next files are read in a background thread while this one is written: reads and pwritev
    # release the GIL, so the disk reads while the writes go to the page cache. Files are read ahead
    # up to READ_AHEAD_BYTES, so a slow write does not stop the reading. A zip
    # checkpoint is read into the page cache and then loaded mapped, its states written from the
    # mapping: torch.load(mmap=False) copies every storage out of the zip at 0.6 GB/s from memory
    # (benchmarks/README.md, "Import and compare of a foreign folder"); another file is decoded
    # whole in the thread.
    loads = [functools.partial(_read_ahead, plan.layout, ref) for ref in plan.samples]
    bar = tqdm(jobs, desc=f"import {plan.format}", unit="sample", disable=not progress)
    with contextlib.closing(read_ahead(loads, sizes=sizes, budget_bytes=READ_AHEAD_BYTES)) as samples:
        for (path, (sample_id, length, pad)), sample in zip(bar, samples):
            sample = sample or read_sample(plan.layout, path, True)
            tokens += _write_one(plan, writer, path, sample, sample_id, length, pad)
            del sample
            if pad:
                padded, padding_tokens = padded + 1, padding_tokens + pad
    return tokens, padded, padding_tokens


def _read_ahead(layout: Layout, ref: SampleRef) -> ForeignSample | None:
    """The read-ahead thread's share of a file: a zip checkpoint into the page cache (None: the writer
    maps it), another file decoded whole (every byte is wanted: one sequential read, mmap=False)."""
    if layout.mappable and is_mapped_checkpoint(ref.path):
        read_through(ref.path)
        return None
    return read_sample(layout, ref, False)


def _write_one(plan: ImportPlan, writer: PlannedDumpWriter, path: SampleRef, sample: ForeignSample, sample_id: str,
               length: int, pad: int) -> int:
    writer.add(sample_id, sample.token_ids[:length], kept_streams(sample, plan, length, pad))
    return length


def _given_ids(layer_ids, config, layout: Layout) -> tuple[list[int] | None, str]:
    if layer_ids is not None and config is not None:
        raise BadInput("give the layer ids once: --layer-ids or --drafter-config, not both")
    if config is not None:
        ids, key = layer_ids_from_config(config)
        _refuse_repeats(ids, f"{os.fspath(config)} {key}")
        return ids, f"from {os.fspath(config)} {key}"
    if layer_ids is not None:
        ids = [int(i) for i in layer_ids]
        if not ids or any(i < 0 and i not in layout.negative_ids for i in ids):
            allowed = f" (or {', '.join(map(str, layout.negative_ids))}, which {layout.name} gives a meaning)" \
                if layout.negative_ids else ""
            raise BadInput(f"layer ids {ids}: give non-negative layer ids{allowed}")
        _refuse_repeats(ids, "--layer-ids")
        return ids, "as given"
    return None, ""


def _refuse_repeats(ids: list[int], where: str) -> None:
    """Each id names one slice of the files. SGLang (SpecForge's capture) and vLLM (speculators') capture
    a repeated id once, so no file holds a slice per repeat: ids 1,1,1 were imported as three slices
    all claiming HF[2], and every comparison of them was then wrong."""
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise BadInput(f"{where} {ids} repeats {', '.join(map(str, repeated))}: each id names one captured layer "
                       "(the engines capture a repeated id once); give the ids the run used, each once")


def _num_layers(fmt, ids, slices, num_layers, target_config) -> tuple[int, str]:
    if num_layers is not None and target_config is not None:
        raise BadInput("give the layer count once: --num-layers or --target-config, not both")
    if target_config is not None:
        return num_layers_from_config(target_config), f"N from {os.fspath(target_config)}"
    if num_layers is not None:
        if int(num_layers) < 1:
            raise BadInput(f"--num-layers {num_layers}: give the target model's decoder layer count")
        return int(num_layers), ""
    n, how = infer_num_layers(fmt, ids, slices)
    if n is None:
        raise BadInput(
            f"the {fmt} files do not say how many layers the target model has: give --num-layers N "
            "or --target-config path/to/target/config.json"
        )
    return n, how


def _claim(tensor: torch.Tensor, hf, hidden, n, final_norm, role, note) -> StreamClaim:
    try:
        dtype = dtype_name(tensor)
    except ValueError:
        dtype = "float32"  # e.g. float64 in a hand-made file: widened exactly on the way in
    try:
        return StreamClaim(tuple(hf), hidden, n, dtype, final_norm, role, note)
    except ValueError as exc:
        raise BadInput(f"cannot describe the imported states: {exc}") from None


def check_like_first(sample: ForeignSample, plan: ImportPlan) -> None:
    if sample.hidden_size is not None and sample.hidden_size != plan.hidden_size:
        raise BadInput(f"{sample.path}: hidden size {sample.hidden_size}, but the first file's is {plan.hidden_size}")
    have = sample.aux.shape[-1] if sample.aux is not None else 0
    if have != plan.file_width:
        raise BadInput(f"{sample.path}: the layer states are {have} wide, but the first file's are {plan.file_width}")
    if "final" in plan.streams and not plan.final_from_tail and sample.final is None:
        raise BadInput(f"{sample.path}: no final hidden_state, unlike the first file")


def kept_streams(sample: ForeignSample, plan: ImportPlan, length: int, pad: int) -> dict[str, torch.Tensor]:
    """What an import keeps of a file read in full, checked against the plan: its streams' first
    ``length`` rows (``pad`` rows of padding dropped), as the import writes them and a folder read in
    place serves them."""
    check_like_first(sample, plan)
    if len(sample.token_ids) != length + pad:
        raise BadInput(f"{sample.path}: changed while it was read ({length + pad} tokens, now {len(sample.token_ids)})")
    return streams_of(sample.truncated(length) if pad else sample, plan)


def streams_of(sample: ForeignSample, plan: ImportPlan) -> dict[str, torch.Tensor]:
    h = plan.hidden_size
    out = {}
    if "aux" in plan.streams:
        out["aux"] = sample.aux[:, : plan.aux_slices * h].contiguous()  # a view unless speculators splits it
    if "final" in plan.streams:
        out["final"] = sample.aux[:, plan.aux_slices * h :].contiguous() if plan.final_from_tail else sample.final
    return out


class SampleNames:
    """Sample ids: a reference dump's id for the same tokens, else the hash of the tokens."""

    def __init__(self, ids_from):
        self.reference: dict[str, str] | None = None
        self.matched: int | None = None
        self._assign = ContentIds()
        if ids_from is not None:
            assign = ContentIds()
            with open_dump(ids_from) as ref:
                self.reference = {assign(ref.token_ids(i).tolist()): sid for i, sid in enumerate(ref.sample_ids)}
            self.matched = 0

    def name(self, tokens: list[int], pad: int) -> tuple[str, int]:
        """``(sample id, padding to drop)`` for a sample whose last ``pad`` tokens look like padding."""
        key = self._assign(tokens[: len(tokens) - pad])
        if self.reference is None:
            return key, pad
        if key in self.reference:
            self.matched += 1
            return self.reference[key], pad
        # Token id 0 can be real: give back trailing zeros one at a time while the reference says so.
        for keep in range(1, pad + 1):
            candidate = token_sample_id(tokens[: len(tokens) - pad + keep])
            if candidate in self.reference:
                self.matched += 1
                return self.reference[candidate], pad - keep
        return key, pad
