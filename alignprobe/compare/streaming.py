"""The streaming pass: one pass over the aligned rows, read in large blocks, feeds every slice's
metrics (and the mapping searches it can feed, feeding.py)."""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import functools
from typing import Callable, Iterator, Sequence

import numpy as np

from alignprobe.compare.feeding import feed, window_pieces
from alignprobe.compare.kernels import Kernels
from alignprobe.compare.mapping import MappingSums
from alignprobe.compare.metrics import SliceAccumulator
from alignprobe.compare.nonfinite_where import FlaggedPair, NonfiniteWhere
from alignprobe.compare.pairing import Segment
from alignprobe.compare.plan import StreamPlan
from alignprobe.compare.result import SliceMetrics, StreamComparison
from alignprobe.dump import Dump
from alignprobe.dump.readahead import read_ahead

READ_AHEAD_BLOCKS = 2  # blocks read in a background thread ahead of the metrics (0: read in turn)
MAX_FEEDING = 4  # blocks waiting for the mapping searches' thread, at most


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


def measure(
    train: Dump,
    serve: Dump,
    plans: list[StreamPlan],
    segments: list[Segment],
    hidden_size: int,
    block_bytes: int,
    kernels: Kernels,
    population: int | None = None,
    mapping: Sequence[MappingSums] = (),
    progress: Callable[[int, int], None] | None = None,
    nonfinite: NonfiniteWhere | None = None,
    explain_feed: Callable[[dict, dict, int, int, int], None] | None = None,
) -> list[StreamComparison]:
    """The streaming pass. ``population``: samples the compared ones were chosen from, when rows were
    left out: each row then carries its sample's number, for the standard errors. ``mapping``:
    searches whose streams the pass reads: each is fed the rows of its windows from the blocks.
    ``nonfinite``: told where the rows holding NaN or Inf are (only blocks that have one).
    ``explain_feed(served, trained, v0, t0, n)``: given every block as read (stored encoding), before
    it is loaded (explaining.ExplainSamples.take)."""
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
            if explain_feed is not None:
                explain_feed(served, trained, v0, t0, len(pos))
            served = {s: kernels.load(raw, serve.encoding(s)) for s, raw in served.items()}
            trained = {s: kernels.load(raw, train.encoding(s)) for s, raw in trained.items()}
            for search in mapping:
                pieces = window_pieces(search, v0, t0, len(pos))
                if pieces:
                    feeding.append(feeder.submit(feed, search, pieces, served, trained, t0))
            while len(feeding) > MAX_FEEDING:  # each holds its block: bound the memory
                feeding.popleft().result()
            terms = kernels.row_terms([
                (trained[p.train_stream][:, p.train_slice * H : (p.train_slice + 1) * H],
                 served[p.plan.serve_stream][:, p.serve_slice * H : (p.serve_slice + 1) * H])
                for p in pairs
            ])
            flagged = []
            for p, t in zip(pairs, terms):
                left_out = p.acc.add(t, pos, samples)
                if left_out is not None and nonfinite is not None:
                    claim = train.streams[p.train_stream]
                    flagged.append(FlaggedPair(p.plan.serve_stream, p.serve_slice, claim.slice_label(p.train_slice),
                                               claim.hf_indices[p.train_slice], t, left_out))
            if flagged and nonfinite is not None:
                nonfinite.add_block(v0, pos, flagged)
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
                    **(p.acc.standard_errors(population) if per_sample and population is not None else {}),
                )
            )
        out.append(comparison)
    return out


def _claim_dict(claim) -> dict:
    """A claim as plain JSON types (a tuple would come back from JSON as a list and compare unequal)."""
    return {**dataclasses.asdict(claim), "hf_indices": list(claim.hf_indices)}
