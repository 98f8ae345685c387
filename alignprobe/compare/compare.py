"""``compare(train, serve)``: the library call behind ``alignprobe compare``.

Order: pair samples and align tokens; pair streams by role; measure which train slice each serve
slice is (mapping search on sampled rows); then one streaming pass over the aligned rows, read in
large blocks, feeds every slice's metrics; then the diagnoses and the verdict.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import dataclasses
import functools
import os
import time
from typing import Any, Callable, Iterator

import h5py
import numpy as np

from alignprobe.compare.diagnoses import sort_findings
from alignprobe.compare.diagnoses.layout import Layout, layout_findings, width_findings
from alignprobe.compare.diagnoses.numeric import numeric_findings
from alignprobe.compare.diagnoses.tokens import token_findings
from alignprobe.compare.kernels import Kernels, kernels_for
from alignprobe.compare.mapping import MappingRequest, MappingSums, read_into, sample_rows, train_candidates
from alignprobe.compare.metrics import SliceAccumulator
from alignprobe.compare.pairing import Segment, pair_samples
from alignprobe.compare.plan import StreamPlan, plan_streams, train_geometry
from alignprobe.compare.policy import Policy, resolve_policy
from alignprobe.compare.result import CompareResult, Finding, SliceMetrics, StreamComparison
from alignprobe.compare.sampling import describe, interval_multiplier, undecided_thresholds
from alignprobe.compare.diagnoses import finding
from alignprobe.dump import ROLE_DRAFTER_INPUT, ROLE_FINAL, Dump, open_dump
from alignprobe.dump.readahead import read_ahead
from alignprobe.errors import BadInput

DEFAULT_MAPPING_TOKENS = 2048
# The mapping search scores every serve slice against every train slice on each sampled row: a wide
# serve stream (a full layer stack: N+1 slices x N+2 candidates) is scored on fewer rows, so that
# (serve values per row) x (rows) stays under MAPPING_BYTES of float32; never fewer than MIN_MAPPING_ROWS.
MAPPING_BYTES = 512 << 20
MIN_MAPPING_ROWS = 128
READ_AHEAD_BLOCKS = 2  # blocks read in a background thread ahead of the metrics (0: read in turn)
MAX_FEEDING = 4  # blocks waiting for the mapping searches' thread, at most


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
    they are imported on the way, with ``train_import``/``serve_import`` as the options of
    :func:`alignprobe.importers.open_source` (``layer_ids``, ``config``, ``system``, ``num_layers``).
    ``device``: where the arithmetic over whole rows runs: ``"cpu"`` (numpy, the default) or a torch
    device (``"cuda"``, ``"cuda:1"``); the result is the same to float rounding. ``block_bytes``:
    float32 bytes read per streaming block (default: the device's, 8 MB on the CPU, 64 MB on a GPU).
    ``progress``: called as ``progress(rows_done, rows_total)`` after each block of the streaming pass
    (the CLI draws a bar from it).
    """
    for name, value in (("sample", sample), ("max_tokens", max_tokens), ("mapping_tokens", mapping_tokens)):
        if value is not None and value < 1:
            raise BadInput(f"{name} must be at least 1, got {value}")
    started = time.perf_counter()
    policy = resolve_policy(policy)
    kernels = kernels_for(device)
    block_bytes = block_bytes or kernels.block_bytes
    with contextlib.closing(kernels), _opened_pair(train, serve, train_import, serve_import) as (tr, sv):
        hidden_size, num_layers = train_geometry(tr)
        notes = [f"train: {n}" for n in tr.notes] + [f"serve: {n}" for n in sv.notes]
        given, load = _tokenizer(tokenizer, tr, sv)
        tokens, segments = pair_samples(
            tr, sv, sample=sample, max_tokens=max_tokens, tokenizer=given, load_tokenizer=load
        )
        findings: list[Finding] = token_findings(tokens, policy)
        plans = plan_streams(tr, sv, hidden_size, notes)
        if not plans:
            raise BadInput(
                f"no serve stream ({', '.join(sv.streams)}) has a train stream to compare with "
                f"({', '.join(tr.streams)}): pair drafter_input, final or layers streams"
            )
        sampled = sample_rows(segments, mapping_tokens)
        sampled_run = tokens.aligned_tokens < tokens.alignable_tokens
        population = tokens.alignable_samples if sampled_run else None
        # The mapping search and the streaming pass are independent (the pass measures the expected
        # pairs; the search says whether they are the right ones). Where the pass reads every stream
        # a search needs, it feeds the search its sampled rows from its own blocks; the other
        # searches read their rows in a thread beside the pass. Read twice, those rows cost their
        # reads twice: h5py reads one call at a time (benchmarks/README.md, the profile).
        measured = [p for p in plans if p.width_ok]
        searches = _mapping_sums(tr, sv, plans, segments, sampled, hidden_size, kernels)
        pass_serve = {p.serve_stream for p in measured if any(e is not None for e in p.expected)}
        pass_train = {e[0] for p in measured for e in p.expected if e is not None}
        fed = [m for m in searches if m.serve_streams <= pass_serve and m.train_streams <= pass_train]
        own = [m for m in searches if m not in fed]
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="alignprobe-mapping") as pool:
            reading = pool.submit(lambda: [read_into(m, tr, sv) for m in own])
            try:
                comparisons = _measure(tr, sv, measured, segments, hidden_size, block_bytes, kernels, population, fed,
                                       progress)
            finally:
                reading.result()
        found = {ms.serve_stream: ms for m in searches for ms in m.results(sv, policy.mapping_tie_cosine)}
        mappings, layouts = [], {}
        for plan in plans:
            if plan.num_slices == 0:
                findings.append(_not_sliceable(sv, plan, hidden_size, policy))
                continue
            if plan.serve_stream not in found:  # no aligned rows to search on
                if not plan.width_ok:
                    findings.append(_width_unmeasured(sv, plan, hidden_size, policy))
                continue
            ms = found[plan.serve_stream]
            mappings.append(ms)
            if not plan.width_ok:
                findings += width_findings(ms, plan.expected_labels, hidden_size, num_layers, policy)
                continue
            layout = _layout(ms, plan, num_layers, policy)
            findings += layout.findings
            layouts[plan.serve_stream] = layout
        if sampled_run and tokens.compared_samples < 2:
            notes.append(
                f"sampling: {tokens.compared_samples} sample compared: its error cannot be estimated from the "
                "spread between samples; compare at least 2 (a larger --max-tokens or --sample)"
            )
        multiplier = interval_multiplier(tokens.compared_samples) if sampled_run else None
        for comparison in comparisons:
            layout = layouts.get(comparison.serve_stream)
            ok = [layout.slice_ok[m.serve_slice] if layout else False for m in comparison.slices]
            comparison.mapping_ok = bool(ok) and all(ok)
            if sampled_run:
                notes += _undecided_notes(comparison, ok, policy, multiplier)
            findings += numeric_findings(
                comparison, ok, policy, dataclasses.asdict(tr.provenance), dataclasses.asdict(sv.provenance)
            )
        findings = sort_findings(_cap_secondary(findings, plans))
        severities = {f.severity for f in findings}
        verdict = "FAIL" if "error" in severities else "WARN" if "warn" in severities else "PASS"
        return CompareResult(
            verdict=verdict,
            findings=findings,
            tokens=tokens,
            streams=comparisons,
            mappings=mappings,
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
                "device": kernels.name,
                **({"sampling": describe(tokens.compared_samples, tokens.alignable_samples, tokens.aligned_tokens,
                                         tokens.alignable_tokens, multiplier),
                    "interval_multiplier": multiplier} if sampled_run else {}),
            },
            notes=notes,
            elapsed_s=time.perf_counter() - started,
        )


def _mapping_sums(train, serve, plans, segments, sampled, hidden_size, kernels) -> list[MappingSums]:
    """The mapping searches of every sliceable serve stream, still to be fed. Streams searched on the
    same rows are searched together (each candidate read once for all of them); a very wide stream
    gets fewer rows, since its work grows with slices x candidates x rows."""
    if not sampled.rows:
        return []
    candidates = train_candidates(train)
    by_rows: dict[int, list[StreamPlan]] = {}
    for plan in plans:
        if plan.num_slices:
            rows = max(MIN_MAPPING_ROWS, MAPPING_BYTES // (4 * hidden_size * plan.num_slices))
            by_rows.setdefault(min(rows, sampled.rows), []).append(plan)
    out = []
    for rows, group in by_rows.items():
        requests = [MappingRequest(p.serve_stream, p.expected_labels, p.role) for p in group]
        rows_used = sampled if rows >= sampled.rows else sample_rows(segments, rows)
        out.append(MappingSums(serve, requests, hidden_size, candidates, rows_used, kernels))
    return out


def _undecided_notes(comparison: StreamComparison, slice_ok: list[bool], policy: Policy, multiplier: float) -> list[str]:
    """A note for each mapped slice whose rel-RMS 95% interval holds a drift threshold."""
    thresholds = {"drift_warn_rel_rms": policy.drift_warn_rel_rms, "drift_fail_rel_rms": policy.drift_fail_rel_rms}
    out = []
    for m, ok in zip(comparison.slices, slice_ok):
        near = undecided_thresholds(m.rel_rms, m.rel_rms_se, thresholds, multiplier) if ok else []
        if near:
            out.append(
                f"sampling: {comparison.serve_stream} {m.label} rel-RMS {m.rel_rms:.4g} ± {multiplier * m.rel_rms_se:.2g} "
                f"(95%) holds {' and '.join(f'{n} {thresholds[n]:g}' for n in near)}: "
                "the sample cannot tell: compare more samples"
            )
    return out


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


def _cap_secondary(findings: list[Finding], plans: list[StreamPlan]) -> list[Finding]:
    """With a drafter_input pair compared, the final stream is not what the drafter reads (EAGLE-3
    feeds it the aux concat only): its findings inform, capped at warn. Without one, they count."""
    if not any(p.role == ROLE_DRAFTER_INPUT for p in plans):
        return findings
    finals = {p.serve_stream for p in plans if p.role == ROLE_FINAL}
    for f in findings:
        if f.stream in finals and f.severity == "error":
            f.severity = "warn"
    return findings


@contextlib.contextmanager
def _opened_pair(train, serve, train_import, serve_import) -> Iterator[tuple[Dump, Dump]]:
    """Both sides open; paths are opened here (and closed after), open Dumps are used as they are."""
    if isinstance(train, Dump) and isinstance(serve, Dump):
        yield train, serve
        return
    if isinstance(train, Dump) or isinstance(serve, Dump):
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


@contextlib.contextmanager
def _opened(dump, options) -> Iterator[Dump]:
    if isinstance(dump, Dump):
        yield dump
        return
    from alignprobe.importers import open_source

    with open_source(dump, **(options or {})) as d:
        yield d


def _layout(ms, plan: StreamPlan, num_layers: int, policy: Policy) -> Layout:
    """Layout diagnosis on the slices that have an expectation (all of them outside layers stacks)."""
    keep = [j for j, e in enumerate(plan.expected_keys) if e is not None]
    if len(keep) == len(plan.expected_keys):
        return layout_findings(ms, plan.expected_keys, num_layers, policy)
    sub = dataclasses.replace(
        ms,
        matches=[ms.matches[j] for j in keep],
        expected=[plan.expected_labels[j] for j in keep],
        claimed=[ms.claimed[j] for j in keep] if ms.claimed else [],
    )
    result = layout_findings(sub, [plan.expected_keys[j] for j in keep], num_layers, policy)
    ok = [False] * len(plan.expected_keys)
    for j, good in zip(keep, result.slice_ok):
        ok[j] = good
    return Layout(result.findings, ok)


def _width_unmeasured(serve: Dump, plan: StreamPlan, hidden_size: int, policy: Policy) -> Finding:
    width = serve.dataset(plan.serve_stream).shape[1]
    return finding(
        "width_mismatch",
        f"serve stream {plan.serve_stream!r} is {width} wide where training used "
        f"{len(plan.expected) * hidden_size} ({', '.join(plan.expected_labels)}); no aligned rows to measure "
        "what it holds",
        {"serve_width": width, "expected_width": len(plan.expected) * hidden_size, "hidden_size": hidden_size,
         "expected": plan.expected_labels},
        "Capture both sides from the same token ids, then compare again to see which HF index each slice is.",
        policy,
        stream=plan.serve_stream,
        role=plan.role,
    )


def _not_sliceable(serve: Dump, plan: StreamPlan, hidden_size: int, policy: Policy) -> Finding:
    width = serve.dataset(plan.serve_stream).shape[1]
    return finding(
        "width_mismatch",
        f"serve stream {plan.serve_stream!r} is {width} wide, not a multiple of the hidden size {hidden_size}",
        {"serve_width": width, "hidden_size": hidden_size, "remainder": width % hidden_size},
        "The serve side is not a concat of hidden states of this model: check that both dumps come from the "
        "same model (hidden size) and that the engine returned whole states (no sharded / tensor-parallel slice).",
        policy,
        stream=plan.serve_stream,
        role=plan.role,
    )


# -- the streaming pass --------------------------------------------------------------------------

@dataclasses.dataclass
class _Pair:
    plan: StreamPlan
    serve_slice: int
    train_stream: str
    train_slice: int
    acc: SliceAccumulator


def _runs(segments: list[Segment]) -> Iterator[list[Segment]]:
    """Consecutive segments whose rows are contiguous on both sides: one read covers them."""
    run: list[Segment] = []
    for seg in segments:
        if run and (
            seg.train_row != run[-1].train_row + run[-1].length or seg.serve_row != run[-1].serve_row + run[-1].length
        ):
            yield run
            run = []
        run.append(seg)
    if run:
        yield run


def _measure(
    train: Dump,
    serve: Dump,
    plans: list[StreamPlan],
    segments: list[Segment],
    hidden_size: int,
    block_bytes: int,
    kernels: Kernels,
    population: int | None = None,
    mapping: list[MappingSums] = (),
    progress: Callable[[int, int], None] | None = None,
) -> list[StreamComparison]:
    """The streaming pass. ``population``: samples the compared ones were chosen from, when rows were
    left out: each row then carries its sample's number, for the standard errors. ``mapping``:
    searches whose streams the pass reads: each is fed the rows of its windows from the blocks."""
    max_position = max((s.position + s.length for s in segments), default=1)
    per_sample = len(segments) if population is not None else 0
    pairs = [
        _Pair(plan, j, exp[0], exp[1], SliceAccumulator(max_position, num_samples=per_sample))
        for plan in plans
        for j, exp in enumerate(plan.expected)
        if exp is not None
    ]
    serve_streams = sorted({p.plan.serve_stream for p in pairs})
    train_streams = sorted({p.train_stream for p in pairs})
    row_bytes = 4 * (
        sum(serve.dataset(s).shape[1] for s in serve_streams) + sum(train.dataset(s).shape[1] for s in train_streams)
    )
    # Whole chunks: a block that ends inside a chunk makes HDF5 read that chunk again for the next
    # block (its chunk cache holds one 1 MiB chunk, a 21504-wide stream has three side by side).
    chunk_rows = max(
        (d.dataset(s).chunks[0] if d.dataset(s).chunks else 1
         for d, names in ((serve, serve_streams), (train, train_streams)) for s in names),
        default=1,
    )
    block_rows = max(chunk_rows, block_bytes // max(1, row_bytes) // chunk_rows * chunk_rows)
    H = hidden_size

    def read_block(positions: np.ndarray, samples: np.ndarray | None, serve_rows: slice, train_rows: slice):
        # The read-ahead thread only reads (the raw read is the limit); loading (the widening on the
        # CPU, the upload to a GPU) is done by the measuring side.
        served = {s: serve.read_raw(s, serve_rows.start, serve_rows.stop) for s in serve_streams}
        trained = {s: train.read_raw(s, train_rows.start, train_rows.stop) for s in train_streams}
        return positions, samples, served, trained, serve_rows.start, train_rows.start

    def block_reads():
        first_sample = 0  # the number of the run's first segment
        for run in _runs(segments):
            positions = np.concatenate([s.position + np.arange(s.length) for s in run])
            samples = None
            if per_sample:
                numbers = np.arange(first_sample, first_sample + len(run))
                samples = np.repeat(numbers, [s.length for s in run])
            first_sample += len(run)
            t0, v0, total = run[0].train_row, run[0].serve_row, len(positions)
            for start in range(0, total, block_rows):
                stop = min(total, start + block_rows)
                yield functools.partial(
                    read_block,
                    positions[start:stop],
                    None if samples is None else samples[start:stop],
                    slice(v0 + start, v0 + stop),
                    slice(t0 + start, t0 + stop),
                )

    # The next block is read while this one is measured (benchmarks/compare_throughput.py).
    # The mapping searches' share of a block is computed in a thread of its own, beside the metrics.
    rows_done, rows_total = 0, sum(s.length for s in segments)
    feeder = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="alignprobe-mapping-feed")
    feeding: collections.deque[concurrent.futures.Future] = collections.deque()
    try:
        for pos, samples, served, trained, v0, t0 in read_ahead(block_reads(), READ_AHEAD_BLOCKS):
            served = {s: kernels.load(raw, serve.encoding(s)) for s, raw in served.items()}
            trained = {s: kernels.load(raw, train.encoding(s)) for s, raw in trained.items()}
            for search in mapping:
                pieces = _window_pieces(search, v0, t0, len(pos))
                if pieces:
                    feeding.append(feeder.submit(_feed, search, pieces, served, trained, t0))
            while len(feeding) > MAX_FEEDING:  # each holds its block: bound the memory
                feeding.popleft().result()
            terms = kernels.row_terms([
                (trained[p.train_stream][:, p.train_slice * H : (p.train_slice + 1) * H],
                 served[p.plan.serve_stream][:, p.serve_slice * H : (p.serve_slice + 1) * H])
                for p in pairs
            ])
            for p, t in zip(pairs, terms):
                p.acc.add(t, pos, samples)
            if progress is not None:
                rows_done += len(pos)
                progress(rows_done, rows_total)
        while feeding:
            feeding.popleft().result()
    finally:
        feeder.shutdown(cancel_futures=True)
    out = []
    for plan in plans:
        sclaim = serve.streams[plan.serve_stream]
        comparison = StreamComparison(
            role=plan.role,
            train_stream=plan.train_stream,
            serve_stream=plan.serve_stream,
            train_claim=_claim_dict(train.streams[plan.train_stream]) if plan.train_stream else {},
            serve_claim=_claim_dict(sclaim),
        )
        for p in (p for p in pairs if p.plan is plan):
            tclaim = train.streams[p.train_stream]
            serve_hf = sclaim.hf_indices[p.serve_slice] if p.serve_slice < len(sclaim.hf_indices) else -1
            comparison.slices.append(
                SliceMetrics(
                    label=tclaim.slice_label(p.train_slice),
                    train_stream=p.train_stream,
                    train_slice=p.train_slice,
                    train_hf_index=tclaim.hf_indices[p.train_slice],
                    serve_stream=plan.serve_stream,
                    serve_slice=p.serve_slice,
                    serve_hf_index=serve_hf,
                    **p.acc.summary(),
                    **(p.acc.standard_errors(population) if per_sample else {}),
                )
            )
        out.append(comparison)
    return out


def _window_pieces(search: MappingSums, v0: int, t0: int, n: int) -> list[tuple[int, int]]:
    """The train rows ``[first, last)`` of ``search``'s windows that a block of ``n`` rows holds
    (serve rows v0.., train rows t0..)."""
    pieces = []
    for (tw0, tw1), (vw0, _) in zip(search.sampled.train_ranges, search.sampled.serve_ranges):
        first, last = max(t0, tw0), min(t0 + n, tw1)
        if first < last and vw0 - tw0 == v0 - t0:  # in this block, aligned as in the block
            pieces.append((first, last))
    return pieces


def _feed(search: MappingSums, pieces: list[tuple[int, int]], served: dict, trained: dict, t0: int) -> None:
    """Give ``search`` the ``pieces`` (train rows) of a block whose train rows start at ``t0``."""
    for first, last in pieces:
        rows = slice(first - t0, last - t0)
        search.add(lambda s, cols: served[s][rows][:, cols], lambda s, cols: trained[s][rows][:, cols])


def _claim_dict(claim) -> dict:
    """A claim as plain JSON types (a tuple would come back from JSON as a list and compare unequal)."""
    return {**dataclasses.asdict(claim), "hf_indices": list(claim.hf_indices)}
