"""``compare(train, serve)``: the library call behind ``alignprobe compare``.

Order: pair samples and align tokens; pair streams by role; measure which train slice each serve
slice is (mapping search on sampled rows, feeding.py) while one streaming pass over the aligned rows
feeds every slice's metrics (streaming.py); then the diagnosis, explanations included, and the
verdict (diagnose.py).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import os
import time
from typing import Any, Callable, Iterator, cast

import h5py

from alignprobe.compare import feeding, streaming
from alignprobe.compare.arguments import checked_count, checked_device, checked_policy, checked_source
from alignprobe.compare.diagnose import diagnose
from alignprobe.compare.explaining import ExplainSamples
from alignprobe.compare.kernels import Kernels
from alignprobe.compare.kernels.choice import chosen_kernels
from alignprobe.compare.mapping import sample_rows
from alignprobe.compare.nonfinite_where import NonfiniteWhere
from alignprobe.compare.pairing import pair_samples
from alignprobe.compare.plan import pass_streams, plan_streams, train_geometry
from alignprobe.compare.policy import Policy
from alignprobe.compare.result import CompareResult
from alignprobe.compare.sampling import describe
from alignprobe.dump import Dump, open_dump
from alignprobe.errors import BadInput

DEFAULT_MAPPING_TOKENS = 2048


def compare(
    train: str | os.PathLike | Dump,
    serve: str | os.PathLike | Dump,
    policy: Policy | dict | str | os.PathLike | None = None,
    *,
    sample: int | None = None,
    max_tokens: int | None = None,
    mapping_tokens: int = DEFAULT_MAPPING_TOKENS,
    tokenizer: Any = "auto",
    block_bytes: int | None = None,
    device: "str | Kernels" = "cpu",
    train_import: dict | None = None,
    serve_import: dict | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> CompareResult:
    """Compare a train-side dump with a serve-side dump; returns a :class:`CompareResult`.

    ``policy``: a :class:`Policy`, a dict of overrides, or a JSON/TOML policy file. ``sample``: compare
    that many paired samples (evenly spread); ``max_tokens``: at most that many aligned rows, whole
    samples spread over the dump (the last one cut), not its first rows. When either leaves rows out,
    each slice carries the standard errors of its cosine mean and rel-RMS from the spread between the
    compared samples (``options["sampling"]`` says how much was compared, a note names each drift
    threshold the sample cannot tell apart from the measured value);
    ``mapping_tokens``: rows sampled for the mapping search; ``tokenizer``: how to show divergent
    tokens as text: anything with ``decode(ids)``, the path of a local tokenizer folder, "auto" (the
    default: the local model folder named in either dump's provenance, if there is one) or None.
    ``train``/``serve`` may also be foreign sources (a SpecForge or speculators folder, EAGLE ge_data):
    they are read in place, with ``train_import``/``serve_import`` as the options of
    :func:`alignprobe.importers.open_source` (``layer_ids``, ``config``, ``system``, ``num_layers``).
    ``device``: where the arithmetic over whole rows runs: ``"cpu"`` (numpy, the default) or a torch
    device (``"cuda"``, ``"cuda:1"``); the result is the same to float rounding. A torch device named
    here runs on the CPU where that is faster (16 cores or more: compare/kernels/choice.py); the
    result says so (``options["device"]`` is where it ran, ``options["device_asked"]`` and a note
    name the request). A Kernels object (``TorchKernels("cuda")``) runs as given. ``block_bytes``:
    float32 bytes read per streaming block (default: the device's, on the CPU 8 MB for
    each two measuring threads, 32 MB with 8; 64 MB on a GPU).
    ``progress``: called as ``progress(rows_done, rows_total)`` after each block of the streaming pass
    (the CLI draws a bar from it).
    """
    train, serve = checked_source(train, "train"), checked_source(serve, "serve")
    sample, max_tokens = checked_count(sample, "sample"), checked_count(max_tokens, "max_tokens")
    mapping_tokens = checked_count(mapping_tokens, "mapping_tokens", allow_none=False)
    block_bytes = checked_count(block_bytes, "block_bytes")
    started = time.perf_counter()
    policy = Policy.resolve(checked_policy(policy))
    device = checked_device(device)
    with contextlib.ExitStack() as closing:
        tr, sv = closing.enter_context(_opened_pair(train, serve, train_import, serve_import))
        hidden_size, num_layers = train_geometry(tr)
        notes = [f"train: {n}" for n in tr.notes] + [f"serve: {n}" for n in sv.notes]
        device_note_at = len(notes)
        given, load = _tokenizer(tokenizer, tr, sv)
        tokens, segments = pair_samples(
            tr, sv, sample=sample, max_tokens=max_tokens, tokenizer=given, load_tokenizer=load
        )
        if tokens.paired_by == "tokens":
            notes.append(f"the two sides name their samples differently: {tokens.paired} samples paired by their token "
                         "sequences (the same tokens, or the same tokens plus one side's padding)")
        plans = plan_streams(tr, sv, hidden_size, notes)
        if not plans:
            raise BadInput(
                f"no serve stream ({', '.join(sv.streams)}) has a train stream to compare with "
                f"({', '.join(tr.streams)}): pair drafter_input, final or layers streams"
            )
        sampled = sample_rows(segments, mapping_tokens)
        sampled_run = tokens.aligned_tokens < tokens.alignable_tokens
        population = tokens.alignable_samples if sampled_run else None
        measured = [p for p in plans if p.width_ok]
        # chosen once the pass's size is known: the compiled kernels pay a start that only a large pass repays
        pass_values = 2 * tokens.aligned_tokens * hidden_size * sum(p.num_slices for p in measured)
        kernels, device_note = chosen_kernels(device, pass_values=pass_values)
        closing.enter_context(contextlib.closing(kernels))
        notes[device_note_at:device_note_at] = [device_note] if device_note else []
        block_bytes = block_bytes or kernels.block_bytes
        searches = feeding.mapping_sums(tr, sv, plans, segments, sampled, hidden_size, kernels)
        # The explanations read their rows from dumps beside the pass as it starts (from a foreign
        # folder the pass hands over the rows of its streams) and are fitted in a thread beside it, so
        # they cost the comparison little wall time (explaining.py, benchmarks/README.md).
        samples = ExplainSamples(tr, sv, plans, segments, num_layers, pass_streams(plans))
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="alignprobe-explain") as pool:
            explaining = pool.submit(samples.explain, policy)
            nonfinite = NonfiniteWhere(segments)  # where NaN / Inf rows are, over every row of the pass
            finished = False
            try:
                comparisons, found = feeding.run_searches(
                    tr, sv, plans, searches,
                    lambda fed: streaming.measure(tr, sv, measured, segments, hidden_size, block_bytes, kernels,
                                                  population, fed, progress, nonfinite, samples.take),
                    policy.mapping_tie_cosine,
                )
                finished = True
            finally:
                samples.pass_over(finished)
            explained = explaining.result()  # NaN rows: located by the pass, over every row
        diagnosis = diagnose(tr, sv, plans, found, comparisons, tokens, policy, hidden_size, num_layers,
                             sampled_run, tokens.compared_samples, notes, explained, nonfinite)
        multiplier = diagnosis.multiplier
        return CompareResult(
            verdict=diagnosis.verdict,
            findings=diagnosis.findings,
            tokens=tokens,
            streams=comparisons,
            mappings=diagnosis.mappings,
            hidden_size=hidden_size,
            num_layers=num_layers,
            train_path=tr.path,
            serve_path=sv.path,
            train_provenance=dataclasses.asdict(tr.provenance),
            serve_provenance=dataclasses.asdict(sv.provenance),
            policy=policy.to_dict(),
            options={
                "sample": sample,
                "max_tokens": max_tokens,
                "mapping_tokens": mapping_tokens,
                "mapping_sampling": sampled.description,
                "block_bytes": block_bytes,
                "device": kernels.name,  # where it ran (kernels/choice.py), and what was asked for where that differs
                **({"device_asked": device} if device_note else {}),
                **({"sampling": describe(tokens.compared_samples, tokens.alignable_samples, tokens.aligned_tokens,
                                         tokens.alignable_tokens, multiplier),
                    "interval_multiplier": multiplier} if multiplier is not None else {}),
            },
            notes=notes,
            elapsed_s=time.perf_counter() - started,
            explanations=diagnosis.explanations,
        )


def _tokenizer(tokenizer: Any, train: Dump, serve: Dump):
    """(a tokenizer object, or a loader to call if one is needed) from compare()'s argument."""
    if tokenizer is None:
        return None, None
    if isinstance(tokenizer, (str, os.PathLike)) and os.fspath(tokenizer) != "auto":
        path = os.fspath(tokenizer)
        return None, lambda: _load_tokenizer([path], required=True)
    if isinstance(tokenizer, str):  # "auto"
        models = [d.provenance.model for d in (train, serve)]
        return None, lambda: _load_tokenizer([m for m in models if m and os.path.isdir(m)], required=False)
    return tokenizer, None


def _load_tokenizer(paths: list[str], required: bool):
    for path in paths:
        try:
            from transformers import AutoTokenizer

            return AutoTokenizer.from_pretrained(path, local_files_only=True)
        except Exception as exc:  # noqa: BLE001 - any failure means "no text", said below if asked for
            if required:
                raise BadInput(f"--tokenizer {path}: cannot load a tokenizer from it ({type(exc).__name__})") from None
    return None


@contextlib.contextmanager
def _opened_pair(train, serve, train_import, serve_import) -> Iterator[tuple[Dump, Dump]]:
    """Both sides open; paths are opened here (and closed after), open Dumps are used as they are."""
    if _is_open(train) and _is_open(serve):
        yield train, serve
        return
    if _is_open(train) or _is_open(serve):
        with _opened(train, train_import) as tr, _opened(serve, serve_import) as sv:
            yield tr, sv
        return
    if _is_hdf5_file(train) and _is_hdf5_file(serve):
        # Two dumps of ours: open them without alignprobe.importers, which imports torch (2 s and
        # 230-500 MB of resident memory a comparison of dumps never uses: benchmarks/README.md).
        with open_dump(train) as tr, open_dump(serve) as sv:
            yield tr, sv
        return
    from alignprobe.importers import open_pair  # torch is needed only for foreign files

    tr, sv = open_pair(train, serve, train_import=train_import, serve_import=serve_import)
    with tr, sv:
        yield tr, sv


def _is_hdf5_file(path) -> bool:
    path = os.fspath(path)
    return os.path.isfile(path) and h5py.is_hdf5(path)


def _is_open(side) -> bool:
    """An open source (a Dump, or a foreign folder read in place), not a path to open."""
    return not isinstance(side, (str, os.PathLike))


@contextlib.contextmanager
def _opened(dump, options) -> Iterator[Dump]:
    if _is_open(dump):
        yield dump
        return
    from alignprobe.importers import open_source  # a foreign folder is read in place

    with open_source(dump, in_place=True, **(options or {})) as d:
        # A foreign folder read in place offers a Dump's read interface (FolderSource), so the pass
        # takes it as one.
        yield cast(Dump, d)


