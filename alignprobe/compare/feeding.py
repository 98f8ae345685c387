"""The mapping search's feeding plumbing: which searches there are, and how they get their rows.

The mapping search and the streaming pass are independent (the pass measures the expected pairs;
the search says whether they are the right ones). Where the pass reads every stream a search
needs, it feeds the search its sampled rows from its own blocks (:func:`feed`); the other searches
read their rows in a thread beside the pass (:func:`run_searches`). Read twice, those rows cost
their reads twice: h5py reads one call at a time (benchmarks/README.md, the profile).
"""

from __future__ import annotations

import concurrent.futures
import functools
from typing import Callable

from alignprobe.compare.mapping import MappingRequest, MappingSums, read_into, sample_rows, train_candidates
from alignprobe.compare.plan import StreamPlan, pass_streams
from alignprobe.compare.result import MappingSearch
from alignprobe.dump import Dump

# The mapping search scores every serve slice against every train slice on each sampled row: a wide
# serve stream (a full layer stack: N+1 slices x N+2 candidates) is scored on fewer rows, so that
# (serve values per row) x (rows) stays under MAPPING_BYTES of float32; never fewer than MIN_MAPPING_ROWS.
MAPPING_BYTES = 512 << 20
MIN_MAPPING_ROWS = 128


def mapping_sums(train, serve, plans, segments, sampled, hidden_size, kernels) -> list[MappingSums]:
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


def run_searches(train: Dump, serve: Dump, plans: list[StreamPlan], searches: list[MappingSums],
                 streaming_pass: Callable[[list[MappingSums]], list], tie_cosine: float):
    """Run ``streaming_pass(fed)`` with the searches it can feed, the others reading their own rows in a
    thread beside it; returns (the pass's result, serve stream -> MappingSearch)."""
    pass_serve, pass_train = pass_streams(plans)
    fed = [m for m in searches if m.serve_streams <= pass_serve and m.train_streams <= pass_train]
    own = [m for m in searches if m not in fed]
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="alignprobe-mapping") as pool:
        reading = pool.submit(_read_all, own, train, serve)
        try:
            out = streaming_pass(fed)
        finally:
            reading.result()
    found: dict[str, MappingSearch] = {ms.serve_stream: ms for m in searches for ms in m.results(serve, tie_cosine)}
    return out, found


def _read_all(searches: list[MappingSums], train: Dump, serve: Dump) -> None:
    for search in searches:
        read_into(search, train, serve)

def window_pieces(search: MappingSums, v0: int, t0: int, n: int) -> list[tuple[int, int]]:
    """The train rows ``[first, last)`` of ``search``'s windows that a block of ``n`` rows holds
    (serve rows v0.., train rows t0..)."""
    pieces = []
    for (tw0, tw1), (vw0, _) in zip(search.sampled.train_ranges, search.sampled.serve_ranges):
        first, last = max(t0, tw0), min(t0 + n, tw1)
        if first < last and vw0 - tw0 == v0 - t0:  # in this block, aligned as in the block
            pieces.append((first, last))
    return pieces


def feed(search: MappingSums, pieces: list[tuple[int, int]], served: dict, trained: dict, t0: int) -> None:
    """Give ``search`` the ``pieces`` (train rows) of a block whose train rows start at ``t0``."""
    for first, last in pieces:
        rows = slice(first - t0, last - t0)
        search.add(functools.partial(_block_rows, served, rows), functools.partial(_block_rows, trained, rows))


def _block_rows(block: dict, rows: slice, stream: str, cols: slice):
    return block[stream][rows][:, cols]
