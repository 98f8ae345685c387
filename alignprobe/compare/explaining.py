"""The diagnosis step's inputs: a few whole samples' rows read for the explanations, per serve stream.

The explanations need rows in context (the same sample at other positions for a row shift, the
neighbouring samples for rows from another request), so this reads runs of consecutive paired
samples, each from its first position, rather than the mapping search's windows. It reads only
the train slices a serve slice may be a transform of: the expected one, the mapping search's best
and runner-up, their neighbours (for a residual split) and both finals; a few MB in all, so the
explanations cost little beside the streaming pass.
"""

from __future__ import annotations

import numpy as np

from alignprobe.compare.explain import explain_stream
from alignprobe.compare.explain.base import ExplainRows
from alignprobe.compare.mapping import candidate_key
from alignprobe.compare.pairing import Segment
from alignprobe.compare.plan import StreamPlan
from alignprobe.compare.policy import Policy
from alignprobe.compare.result import MappingSearch, SliceExplanation
from alignprobe.dump import ROLE_LAYERS, Dump

EXPLAIN_BYTES = 24 << 20  # float32 rows held at once for one stream's explanations (H = 7168: ~120 rows)
MAX_ROWS = 1024
MIN_ROWS = 64
RUNS = 2  # runs of consecutive samples (the start and the middle of the pairing order)
SAMPLES_PER_RUN = 5
SMALL_TRAIN = 16  # train slices in all, at most, for every one of them to be a candidate
FIT_RUN = 8  # positions per run of fit / held-out rows inside a sample


def explain_plans(train: Dump, serve: Dump, plans: list[StreamPlan], segments: list[Segment], num_layers: int,
                  policy: Policy) -> tuple[dict[str, list[SliceExplanation]], list[dict]]:
    """Explanations of every drafter_input / final stream whose width matches training (layers stacks
    are investigation views: not explained), and where the sampled rows held non-finite values.
    Independent of the streaming pass and the mapping search, so it runs beside them."""
    where: list[dict] = []
    out = {p.serve_stream: explain_plan(train, serve, p, None, segments, num_layers, policy, where)
           for p in plans if p.width_ok and p.role != ROLE_LAYERS}
    return out, where


def explain_plan(train: Dump, serve: Dump, plan: StreamPlan, mapping: MappingSearch | None, segments: list[Segment],
                 num_layers: int, policy: Policy, where_nonfinite: list[dict]) -> list[SliceExplanation]:
    """Explanations of every slice of one serve stream (one whose width matches training)."""
    keys = _candidate_keys(train, plan, mapping, num_layers)
    if not keys or not segments:
        return []
    hidden = train.streams[next(iter(train.streams))].hidden_size
    budget = max(MIN_ROWS, min(MAX_ROWS, EXPLAIN_BYTES // (4 * hidden * (plan.num_slices + len(keys)))))
    chosen = _chosen_segments(segments, budget)
    serve_parts, train_parts, samples, positions = [], {k: [] for k in keys}, [], []
    by_stream: dict[str, dict] = {}
    for key, (stream, j) in keys.items():
        by_stream.setdefault(stream, {})[key] = j
    for number, (seg, length) in enumerate(chosen):
        serve_parts.append(serve.read(plan.serve_stream, seg.serve_row, seg.serve_row + length))
        # one read a train stream (the columns its wanted slices span), sliced here: a chunked dataset
        # read column by column would read each chunk once per slice, and h5py reads one call at a time
        # (the streaming pass beside this waits for every call)
        for stream, slices in by_stream.items():
            lo, hi = min(slices.values()), max(slices.values()) + 1
            block = train.read(stream, seg.train_row, seg.train_row + length, slice(lo * hidden, hi * hidden))
            for key, j in slices.items():
                train_parts[key].append(block[:, (j - lo) * hidden : (j - lo + 1) * hidden])
        samples.append(np.full(length, number))
        positions.append(seg.position + np.arange(length))
    served = np.concatenate(serve_parts).reshape(-1, plan.num_slices, hidden)
    trained = {k: np.concatenate(v) for k, v in train_parts.items()}
    sample, position = np.concatenate(samples), np.concatenate(positions)
    finite = np.isfinite(served).all(axis=(1, 2))
    for v in trained.values():
        finite &= np.isfinite(v).all(axis=1)
    for r in np.flatnonzero(~finite)[:20]:
        where_nonfinite.append({"stream": plan.serve_stream, "sample_id": chosen[int(sample[r])][0].sample_id,
                                "position": int(position[r])})
    keep = finite
    sclaim = serve.streams[plan.serve_stream]
    claimed = [sclaim.hf_indices[j] if sclaim.width == plan.num_slices * hidden and j < len(sclaim.hf_indices) else None
               for j in range(plan.num_slices)]
    labels = {}
    for key, (stream, j) in keys.items():
        labels[key] = train.streams[stream].slice_label(j)
    rows = ExplainRows(
        serve=served[keep],
        train={k: v[keep] for k, v in trained.items()},
        sample=sample[keep],
        position=position[keep],
        sample_ids=[seg.sample_id for seg, _ in chosen],
        fit=((position[keep] // FIT_RUN) + sample[keep]) % 2 == 0,
        expected=list(plan.expected_keys),
        claimed=claimed,
        num_layers=num_layers,
        tolerance=policy.drift_fail_rel_rms,
        drift_tolerance=policy.explain_drift_rel_rms,
        position_growth=policy.position_growth,
        train_provenance=_provenance(train),
        serve_provenance=_provenance(serve),
        labels=labels,
    )
    if rows.fit.sum() < 4 or rows.held_out.sum() < 4:
        return []
    return explain_stream(rows, plan.serve_stream)


def _provenance(dump: Dump) -> dict:
    p = dump.provenance
    return {"engine": p.engine, "dtype": p.dtype, "quantization": p.quantization}


def _chosen_segments(segments: list[Segment], budget: int) -> list[tuple[Segment, int]]:
    """Runs of consecutive segments, each cut to an even share of the row budget."""
    starts = sorted({0, max(0, len(segments) // 2 - 1)})[:RUNS]
    picked: list[Segment] = []
    for start in starts:
        for seg in segments[start : start + SAMPLES_PER_RUN]:
            if seg not in picked:
                picked.append(seg)
    share = max(2 * FIT_RUN, budget // max(1, len(picked)))
    return [(seg, min(seg.length, share)) for seg in picked]


def _candidate_keys(train: Dump, plan: StreamPlan, mapping: MappingSearch | None, num_layers: int) -> dict:
    """key -> (train stream, slice) for the train slices worth fitting against."""
    where: dict = {}
    for name, claim in train.streams.items():
        for j in range(len(claim.hf_indices)):
            where.setdefault(candidate_key(claim, j), (name, j))
    wanted = set()
    for key in plan.expected_keys:
        if key is not None:
            wanted |= {key, (key[0] - 1, "post"), (key[0] + 1, "post"), (key[0] + 2, "post"), (key[0] - 2, "post")}
    if mapping is not None:
        for m in mapping.matches:
            for c in (m.best, m.runner_up):
                if c >= 0:
                    cand = mapping.candidates[c]
                    i = cand.hf_index
                    wanted |= {(i, cand.final_norm), (i - 1, "post"), (i + 1, "post")}
    wanted |= {(num_layers, "pre"), (num_layers, "post")}
    if len(where) <= SMALL_TRAIN:  # a train side of few slices (a SpecForge dataset): all of them
        wanted |= set(where)
    # below N a key's norm is always "post" (mapping.candidate_key)
    wanted = {(i, n if i == num_layers else "post") for i, n in wanted}
    return {k: where[k] for k in sorted(wanted) if k in where}
