"""Which train slice is each serve slice, really? A similarity matrix on sampled tokens.

Every serve slice (H columns) is scored against every distinct train slice (every HF index of every
train stream) by the mean per-token cosine on a sample of aligned rows. That is (train slices) x
(serve slices) dot products of H per token, so the rows are sampled: a few contiguous windows spread
over the aligned rows (contiguous, because HDF5 reads whole chunks and scattered rows would read most
of the file). Cosine is blind to scale, so it finds the source even under a scale error; where two
candidates tie on cosine (the pre- and post-norm final state point the same way when the norm's
weights are near 1) the norm ratio closest to 1 decides.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, Callable, Iterator

import numpy as np

from alignprobe.compare.kernels import Kernels, kernels_for
from alignprobe.compare.pairing import Segment
from alignprobe.compare.result import Candidate, MappingSearch, SliceMatch
from alignprobe.dump import FINAL_NORM_POST, Dump, StreamClaim

# Preference when two train streams hold the same HF index: the full layer stack names it.
ROLE_ORDER = {"layers": 0, "drafter_input": 1, "final": 2}
WINDOWS = 16  # contiguous windows the sampled rows are spread over


def candidate_key(claim: StreamClaim, j: int) -> tuple[int, str]:
    """What a train slice is: its HF index, and pre/post norm when it is the final index."""
    i = claim.hf_indices[j]
    return i, (claim.final_norm if i == claim.num_layers else FINAL_NORM_POST)


def train_candidates(train: Dump) -> list[Candidate]:
    """The distinct slices of every train stream (the same HF index held twice counts once)."""
    seen: dict[tuple[int, str], Candidate] = {}
    order = sorted(train.streams.items(), key=lambda kv: (ROLE_ORDER.get(kv[1].role, 9), kv[0]))
    for name, claim in order:
        for j in range(len(claim.hf_indices)):
            key = candidate_key(claim, j)
            if key not in seen:
                seen[key] = Candidate(name, j, key[0], key[1], claim.slice_label(j))
    return sorted(seen.values(), key=lambda c: (c.hf_index, c.final_norm != "pre"))


@dataclasses.dataclass
class SampledRows:
    """Windows of aligned rows: ``train_ranges[i]`` pairs with ``serve_ranges[i]``."""

    train_ranges: list[tuple[int, int]]
    serve_ranges: list[tuple[int, int]]
    rows: int
    description: str


def sample_rows(segments: list[Segment], tokens: int, windows: int = WINDOWS) -> SampledRows:
    """About ``tokens`` aligned rows in up to ``windows`` contiguous windows spread evenly."""
    lengths = np.array([s.length for s in segments], dtype=np.int64)
    total = int(lengths.sum())
    if total == 0:
        return SampledRows([], [], 0, "no aligned rows")
    if total <= tokens:
        t = [(s.train_row, s.train_row + s.length) for s in segments]
        v = [(s.serve_row, s.serve_row + s.length) for s in segments]
        return SampledRows(t, v, total, f"all {total} aligned rows")
    width = max(1, tokens // windows)
    starts = np.linspace(0, total - width, windows).round().astype(np.int64)
    ends = np.cumsum(lengths)
    t_ranges, v_ranges, rows = [], [], 0
    for start in starts:
        k = int(np.searchsorted(ends, start, side="right"))
        seg = segments[k]
        offset = int(start - (ends[k] - seg.length))
        n = min(width, seg.length - offset)
        t_ranges.append((seg.train_row + offset, seg.train_row + offset + n))
        v_ranges.append((seg.serve_row + offset, seg.serve_row + offset + n))
        rows += n
    return SampledRows(
        t_ranges, v_ranges, rows, f"{rows} of {total} aligned rows in {len(starts)} windows of up to {width}"
    )


def _read(dump: Dump, stream: str, ranges, kernels: Kernels, columns: slice | None = None):
    raw = np.concatenate([dump.read_raw(stream, a, b, columns) for a, b in ranges])
    return kernels.load(raw, dump.encoding(stream))


def _read_ranges(dump: Dump, ranges, kernels: Kernels, stream: str, columns: slice):
    """:func:`_read` with the rows bound first: what MappingSums.add asks of a block."""
    return _read(dump, stream, ranges, kernels, columns)


GROUP_ROWS = 256  # sampled rows scored at once: one slice of them is ~7 MB at H = 7168
# ... but fewer for a wide serve stream: all its slices of a group are held at once (twice: values
# and unit rows), so a full 62-slice layer stack at H = 7168 is scored 36 rows at a time.
GROUP_BYTES = 64 << 20


def _groups(sampled: SampledRows, group_rows: int = GROUP_ROWS) -> Iterator[tuple[list[tuple[int, int]], list[tuple[int, int]]]]:
    """The sampled windows in groups of about ``group_rows`` rows (many short segments read together)."""
    t_group: list[tuple[int, int]] = []
    v_group: list[tuple[int, int]] = []
    rows = 0
    for (t0, t1), (v0, _v1) in zip(sampled.train_ranges, sampled.serve_ranges):
        for start in range(0, t1 - t0, group_rows):  # a long window is split too
            stop = min(t1 - t0, start + group_rows)
            t_group.append((t0 + start, t0 + stop))
            v_group.append((v0 + start, v0 + stop))
            rows += stop - start
            if rows >= group_rows:
                yield t_group, v_group
                t_group, v_group, rows = [], [], 0
    if t_group:
        yield t_group, v_group


@dataclasses.dataclass
class MappingRequest:
    """One serve stream to search: what the training side expects of it, and its role."""

    serve_stream: str
    expected: list[str]
    role: str


class MappingSums:
    """The mapping search's running sums for some serve streams against every candidate, fed rows
    that are aligned pairwise (train row i is serve row i) from anywhere: a search's own reads
    (:func:`search_mappings`) or the blocks of compare's streaming pass."""

    def __init__(self, serve: Dump, requests: list[MappingRequest], hidden_size: int, candidates: list[Candidate],
                 sampled: SampledRows, kernels: Kernels):
        self.requests, self.candidates, self.sampled = requests, candidates, sampled
        self.hidden_size, self.kernels = hidden_size, kernels
        self.widths = [serve.dataset(r.serve_stream).shape[1] // hidden_size for r in requests]
        # per request: cosine sum, rows usable on both sides, serve / train ||x||^2 over those rows
        self.sums = [np.zeros((4, k, len(candidates))) for k in self.widths]

    @property
    def serve_streams(self) -> set[str]:
        return {r.serve_stream for r, k in zip(self.requests, self.widths) if k}

    @property
    def train_streams(self) -> set[str]:
        return {c.stream for c in self.candidates}

    def add(self, serve_block: Callable[[str, slice], Any], train_block: Callable[[str, slice], Any]) -> None:
        """Add some aligned rows: ``serve_block(stream, columns)`` / ``train_block(stream, columns)``
        give them, loaded by the kernels (called once per serve stream and per candidate)."""
        H = self.hidden_size
        searched = [(r, k, acc) for r, k, acc in zip(self.requests, self.widths, self.sums) if k]
        if not searched:
            return
        units = [self.kernels.serve_units(serve_block(r.serve_stream, slice(0, k * H)), k, H) for r, k, _ in searched]
        for c, cand in enumerate(self.candidates):
            train_slice = self.kernels.train_units(train_block(cand.stream, slice(cand.slice * H, (cand.slice + 1) * H)))
            for (_, _, acc), serve_units in zip(searched, units):
                acc[:, :, c] += self.kernels.candidate_sums(serve_units, train_slice)

    def results(self, serve: Dump, tie_cosine: float) -> list[MappingSearch]:
        return [
            _mapping(serve, r, k, acc, self.hidden_size, self.candidates, self.sampled, tie_cosine)
            for r, k, acc in zip(self.requests, self.widths, self.sums)
        ]


def search_mappings(
    train: Dump,
    serve: Dump,
    requests: list[MappingRequest],
    hidden_size: int,
    candidates: list[Candidate],
    sampled: SampledRows,
    *,
    tie_cosine: float,
    kernels: Kernels | None = None,
) -> list[MappingSearch]:
    """Score every serve slice of each requested stream against every candidate; pick the best of each.

    The streams are searched together, so each candidate's rows are read and normalised once for all
    of them (on ``kernels``' device: numpy by default).
    """
    sums = MappingSums(serve, requests, hidden_size, candidates, sampled, kernels or kernels_for("cpu"))
    read_into(sums, train, serve)
    return sums.results(serve, tie_cosine)


def read_into(sums: MappingSums, train: Dump, serve: Dump) -> None:
    """Feed ``sums`` its sampled rows, read from the dumps a group of windows at a time: arrays of a
    few MB that stay in cache, instead of every sampled row of every slice at once (hundreds of MB,
    page-faulted fresh for each candidate: most of compare's time once, benchmarks/README.md)."""
    group_rows = max(16, min(GROUP_ROWS, GROUP_BYTES // (4 * max(1, sum(sums.widths)) * sums.hidden_size)))
    for train_ranges, serve_ranges in _groups(sums.sampled, group_rows) if sums.serve_streams else ():
        sums.add(
            functools.partial(_read_ranges, serve, serve_ranges, sums.kernels),
            functools.partial(_read_ranges, train, train_ranges, sums.kernels),
        )


def _mapping(serve: Dump, request: MappingRequest, k: int, sums: np.ndarray, hidden_size: int,
             candidates: list[Candidate], sampled: SampledRows, tie_cosine: float) -> MappingSearch:
    dots, both, serve_sq_sum, train_sq_sum = sums
    cos = dots / np.maximum(both, 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        den = train_sq_sum
        ratio = np.where(den > 0, np.sqrt(serve_sq_sum / np.where(den > 0, den, 1.0)), math.inf)
    matches = [_best(j, cos[j], ratio[j], candidates, tie_cosine) for j in range(k)]
    claim = serve.streams[request.serve_stream]
    claimed = [claim.slice_label(j) for j in range(len(claim.hf_indices))] if claim.width == k * hidden_size else []
    return MappingSearch(
        serve_stream=request.serve_stream,
        role=request.role,
        serve_labels=claimed or [f"slice {j}" for j in range(k)],
        candidates=candidates,
        cosine=cos.tolist(),
        norm_ratio=ratio.tolist(),
        matches=matches,
        expected=request.expected,
        claimed=claimed,
        tokens_sampled=sampled.rows,
        sampling=sampled.description,
    )


def _best(j: int, cos: np.ndarray, ratio: np.ndarray, candidates: list[Candidate], tie_cosine: float) -> SliceMatch:
    order = np.argsort(-cos, kind="stable")
    best = int(order[0])
    tied = [int(c) for c in order if cos[c] >= cos[best] - tie_cosine]
    broken = len(tied) > 1
    if broken:
        # Same direction: the candidate whose magnitude agrees is the one it is.
        best = min(tied, key=lambda c: abs(math.log(ratio[c])) if 0 < ratio[c] < math.inf else math.inf)
    rest = [int(c) for c in order if c != best]
    runner = rest[0] if rest else -1
    runner_score = float(cos[runner]) if runner >= 0 else -1.0
    return SliceMatch(
        serve_slice=j,
        best=best,
        best_label=candidates[best].label,
        score=float(cos[best]),
        runner_up=runner,
        runner_up_label=candidates[runner].label if runner >= 0 else "",
        runner_up_score=runner_score,
        margin=float(cos[best]) - runner_score,
        tie_broken_by_norm=broken,
    )
