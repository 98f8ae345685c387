"""The diagnosis step's inputs: a few whole samples' rows, gathered once for every explained stream.

The explanations need rows in context (the same sample at other positions for a row shift, the
neighbouring samples for rows from another request), so they take runs of consecutive paired
samples, each from its first position, rather than the mapping search's windows. Only the train
slices a serve slice may be a transform of are kept: the expected one, its neighbours (for a
residual split) and both finals; a few MB in all.

From HDF5 dumps every row is read beside the streaming pass as it starts, and fitted at once: handed
over by the pass (which reaches the middle run past half of the dump), the fits started so late
that their tail outlasted a short pass (1-2 GB per dump on the H200 host, benchmarks/README.md).
Read early, those few chunks are in the page cache when the pass gets to them, so the disk reads
them once. A foreign folder read in place decodes (or reads into the page cache) a whole file for a
read of a few rows, into caches sized for a pass in order: there the pass hands the rows of the
streams it reads over from its own blocks (:meth:`ExplainSamples.take`, as feeding.py does for the
mapping search), and only the rest is read beside it. Every row lands in one preallocated float32
buffer per serve stream and per train slice, shared by every stream's explanations, so no copy of
them is made (benchmarks/results/compare_explain_cost.txt measures what this saved).
"""

from __future__ import annotations

import threading

import numpy as np

from alignprobe.compare.explain import explain_stream
from alignprobe.compare.explain.base import ExplainRows
from alignprobe.compare.mapping import candidate_key
from alignprobe.compare.pairing import Segment
from alignprobe.compare.plan import StreamPlan
from alignprobe.compare.policy import Policy
from alignprobe.compare.result import SliceExplanation
from alignprobe.dump import ROLE_LAYERS, Dump
from alignprobe.dump.encoding import widen_into

EXPLAIN_BYTES = 24 << 20  # float32 rows held for every stream's explanations (H = 7168, 8 slices: ~110 rows)
MAX_ROWS = 1024
MIN_ROWS = 64
RUNS = 2  # runs of consecutive samples (the start and the middle of the pairing order)
SAMPLES_PER_RUN = 5
SMALL_TRAIN = 16  # train slices in all, at most, for every one of them to be a candidate
FIT_RUN = 8  # positions per run of fit / held-out rows inside a sample


class ExplainSamples:
    """The explanations' rows of every explained stream: the pass feeds what it reads
    (:meth:`take`), :meth:`explain` reads the rest, waits for the pass's share, and fits."""

    def __init__(self, train: Dump, serve: Dump, plans: list[StreamPlan], segments: list[Segment], num_layers: int,
                 pass_streams: tuple[set[str], set[str]]):
        """``pass_streams``: (serve, train) streams the streaming pass reads (plan.pass_streams): it hands
        their rows over where a side reads whole files per read (``cheap_random_reads`` False)."""
        self.train, self.serve, self.num_layers = train, serve, num_layers
        self.hidden = train.streams[next(iter(train.streams))].hidden_size
        # explained: drafter_input / final streams whose width matches training (layers stacks are
        # investigation views)
        self.keys = {p.serve_stream: keys for p in plans if p.width_ok and p.role != ROLE_LAYERS
                     for keys in [_candidate_keys(train, p, num_layers)] if keys}
        self.plans = [p for p in plans if p.serve_stream in self.keys]
        self.where = {k: v for keys in self.keys.values() for k, v in keys.items()}  # key -> (train stream, slice)
        slices = sum(p.num_slices for p in self.plans) + len(self.where)
        budget = max(MIN_ROWS, min(MAX_ROWS, EXPLAIN_BYTES // (4 * self.hidden * max(1, slices))))
        self.chosen = _chosen_segments(segments, budget) if self.plans else []
        self.starts = np.cumsum([0] + [length for _, length in self.chosen])
        rows, H = int(self.starts[-1]), self.hidden
        self.served = {p.serve_stream: np.empty((rows, p.num_slices * H), np.float32) for p in self.plans}
        self.trained = {key: np.empty((rows, H), np.float32) for key in self.where}
        # the expected slices' rows at the train sample's end, where a serve sample is a strict prefix
        # of its train sample (explain/end_aligned.py): a few more rows, read only then
        self.end_offsets = [_end_offset(train, serve, seg) for seg, _ in self.chosen]
        end_keys = {k for p in self.plans for k in p.expected_keys if k in self.where} if any(self.end_offsets) else ()
        self.end = {key: np.full((rows, H), np.nan, np.float32) for key in end_keys}
        self.layer_stack, layer_keys = _serve_layer_keys(train, serve, self.plans, H)
        self.serve_layers = {key: np.empty((rows, H), np.float32) for key in layer_keys}
        fed_serve, fed_train = pass_streams
        if train.cheap_random_reads and serve.cheap_random_reads:
            fed_serve, fed_train = set(), set()  # every row read at once, beside the pass (above)
        self.fed_serve = [s for s in self.served if s in fed_serve]
        self.fed_keys = [k for k, (stream, _) in self.where.items() if stream in fed_train]
        self.own_serve = [s for s in self.served if s not in fed_serve]
        self.own_keys = [k for k in self.where if k not in self.fed_keys]
        self._received = np.zeros(rows, bool)
        self._fed = threading.Event()
        self._pass_finished = True
        if not (self.fed_serve or self.fed_keys) or not rows:
            self._fed.set()

    # -- the streaming pass's side (its own thread) -----------------------------------------------

    def take(self, served_raw: dict, trained_raw: dict, v0: int, t0: int, n: int) -> None:
        """Copy the wanted rows of one of the pass's blocks (stored encoding; serve rows from ``v0``,
        train rows from ``t0``, ``n`` of each, aligned row by row)."""
        if self._fed.is_set():
            return
        H = self.hidden
        for (seg, length), start in zip(self.chosen, self.starts):
            first, last = max(t0, seg.train_row), min(t0 + n, seg.train_row + length)
            if first >= last or seg.serve_row - seg.train_row != v0 - t0:
                continue
            src = slice(first - t0, last - t0)
            dst = slice(start + first - seg.train_row, start + last - seg.train_row)
            for s in self.fed_serve:
                widen_into(self.served[s][dst], served_raw[s][src], self.serve.encoding(s))
            for key in self.fed_keys:
                stream, j = self.where[key]
                widen_into(self.trained[key][dst], trained_raw[stream][src, j * H : (j + 1) * H],
                           self.train.encoding(stream))
            self._received[dst] = True
        if self._received.all():
            self._fed.set()

    def pass_over(self, finished: bool) -> None:
        """The pass ended (``finished``) or stopped early: :meth:`explain` waits no longer."""
        self._pass_finished = finished
        self._fed.set()

    # -- the explanations' side (a thread beside the pass) ----------------------------------------

    def explain(self, policy: Policy) -> dict[str, list[SliceExplanation]]:
        """Explanations of every explained stream (non-finite rows are left out; the pass locates them).
        Empty when the pass stopped before it handed every row over (compare fails then anyway)."""
        if not self.chosen:  # no paired rows: nothing to explain
            return {}
        self._read(self.own_serve, self.own_keys)
        self._fed.wait()
        if not self._pass_finished:
            return {}
        if not self._received.all():  # a finished pass hands every row over; should one be missed, read it
            self._read(self.fed_serve, self.fed_keys, only_missing=True)
        self._read_end()
        self._read_serve_layers()
        for array in (*self.served.values(), *self.trained.values(), *self.end.values(), *self.serve_layers.values()):
            array.flags.writeable = False  # shared by every stream's explanations
        return {p.serve_stream: self._explain_plan(p, policy) for p in self.plans}

    def _read(self, serve_streams: list[str], keys: list, only_missing: bool = False) -> None:
        """Read the rows of these streams and train slices: one read a stream and sample (the columns its
        wanted slices span; a chunked dataset read column by column would read each chunk once per slice)."""
        H = self.hidden
        by_stream: dict[str, list] = {}
        for key in keys:
            by_stream.setdefault(self.where[key][0], []).append(key)
        for (seg, length), start in zip(self.chosen, self.starts):
            dst = slice(start, start + length)
            if only_missing and self._received[dst].all():
                continue
            for s in serve_streams:
                widen_into(self.served[s][dst], self.serve.read_raw(s, seg.serve_row, seg.serve_row + length),
                           self.serve.encoding(s))
            for stream, keys in by_stream.items():
                lo = min(self.where[k][1] for k in keys)
                hi = max(self.where[k][1] for k in keys) + 1
                block = self.train.read_raw(stream, seg.train_row, seg.train_row + length, slice(lo * H, hi * H))
                for key in keys:
                    j = self.where[key][1] - lo
                    widen_into(self.trained[key][dst], block[:, j * H : (j + 1) * H], self.train.encoding(stream))

    def _read_end(self) -> None:
        """The end rows (self.end) of the samples whose serve side is a strict prefix of the train one."""
        H = self.hidden
        for (seg, length), start, offset in zip(self.chosen, self.starts, self.end_offsets):
            if not offset:
                continue
            for key, out in self.end.items():
                stream, j = self.where[key]
                first = seg.train_row + offset
                widen_into(out[start:start + length], self.train.read_raw(stream, first, first + length,
                                                                           slice(j * H, (j + 1) * H)),
                           self.train.encoding(stream))

    def _read_serve_layers(self) -> None:
        """The serve layer stack's slices of self.serve_layers, one read a sample (the columns they span)."""
        if not self.serve_layers:
            return
        H, claim = self.hidden, self.serve.streams[self.layer_stack]
        where = {candidate_key(claim, j): j for j in range(len(claim.hf_indices))}
        lo = min(where[k] for k in self.serve_layers)
        hi = max(where[k] for k in self.serve_layers) + 1
        for (seg, length), start in zip(self.chosen, self.starts):
            block = self.serve.read_raw(self.layer_stack, seg.serve_row, seg.serve_row + length, slice(lo * H, hi * H))
            for key, out in self.serve_layers.items():
                j = where[key] - lo
                widen_into(out[start:start + length], block[:, j * H : (j + 1) * H], self.serve.encoding(self.layer_stack))

    def _explain_plan(self, plan: StreamPlan, policy: Policy) -> list[SliceExplanation]:
        """Explanations of every slice of one serve stream."""
        keys, H = self.keys[plan.serve_stream], self.hidden
        served = self.served[plan.serve_stream].reshape(-1, plan.num_slices, H)
        trained = {k: self.trained[k] for k in keys}
        end = {k: self.end[k] for k in keys if k in self.end}
        layers = dict(self.serve_layers)
        sample = np.repeat(np.arange(len(self.chosen)), [length for _, length in self.chosen])
        position = np.concatenate([seg.position + np.arange(length) for seg, length in self.chosen])
        finite = np.isfinite(served).all(axis=(1, 2))
        for v in trained.values():
            finite &= np.isfinite(v).all(axis=1)
        # Degenerate rows (all zero or constant: rows an engine never computed, such as a prefix-cache
        # hit's, left as the buffer's zeros) are no state to explain: `degenerate` names them. Fitted,
        # they made a cause of their own: the rmsnorm form of channel_scale rescales to the serve row's
        # norm, so it "predicts" a zero row exactly, and foreign_rows took zero rows alike across
        # samples for padding (tests/cases/holdout3_cases.py prefix_zeros: channel_scale / foreign_rows named
        # on a Llama and a DeepseekV3 whose other rows were exact).
        finite &= ~(served.max(axis=2) == served.min(axis=2)).any(axis=1)
        if not finite.all():  # the rare case: copies without the non-finite (or degenerate) rows
            served, sample, position = served[finite], sample[finite], position[finite]
            trained = {k: v[finite] for k, v in trained.items()}
            end = {k: v[finite] for k, v in end.items()}
            layers = {k: v[finite] for k, v in layers.items()}
        sclaim = self.serve.streams[plan.serve_stream]
        claimed = [sclaim.hf_indices[j] if sclaim.width == plan.num_slices * H and j < len(sclaim.hf_indices) else None
                   for j in range(plan.num_slices)]
        rows = ExplainRows(
            serve=served,
            train=trained,
            sample=sample,
            position=position,
            sample_ids=[seg.sample_id for seg, _ in self.chosen],
            fit=((position // FIT_RUN) + sample) % 2 == 0,
            expected=list(plan.expected_keys),
            claimed=claimed,
            num_layers=self.num_layers,
            tolerance=policy.drift_fail_rel_rms,
            drift_tolerance=policy.explain_drift_rel_rms,
            position_growth=policy.position_growth,
            train_provenance=_provenance(self.train),
            serve_provenance=_provenance(self.serve),
            labels={key: self.train.streams[stream].slice_label(j) for key, (stream, j) in keys.items()},
            end_rows=end,
            end_offsets=self.end_offsets,
            serve_layers=layers,
        )
        if rows.fit.sum() < 4 or rows.held_out.sum() < 4:
            return []
        return explain_stream(rows, plan.serve_stream)


def _provenance(dump: Dump) -> dict:
    p = dump.provenance
    # the engine and what the capture recorded name the system a fix speaks to (system_flags.system_of)
    return {"engine": p.engine, "dtype": p.dtype, "quantization": p.quantization, "model": p.model,
            "extra": p.extra, "capture": p.capture}


def _end_offset(train: Dump, serve: Dump, seg: Segment) -> int:
    """The train sample's length minus the serve sample's where the serve token ids are a strict prefix
    of the train ones (the whole serve sample is the common part, from position 0), else 0."""
    train_length, serve_length = train.sample_length(seg.sample_id), serve.sample_length(seg.serve_id)
    whole = seg.position == 0 and seg.serve_row == serve.span(seg.serve_id)[0] and seg.length == serve_length
    return train_length - serve_length if whole and train_length > serve_length else 0


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


LAYER_REACH = 2  # serve layers read either side of each expected train index and serve claim


def _serve_layer_keys(train: Dump, serve: Dump, plans: list[StreamPlan], hidden: int) -> tuple[str, list]:
    """(the serve layer stack, its keys worth reading) where it holds layers the train side lacks: the
    serve layers within LAYER_REACH of every expected and claimed index of the explained streams.
    ("", []) otherwise (a train side with every layer is measured against its own)."""
    stacks = [(len(c.hf_indices), name) for name, c in serve.streams.items()
              if c.role == ROLE_LAYERS and c.width == len(c.hf_indices) * hidden]
    if not stacks or not plans:
        return "", []
    stack = max(stacks)[1]
    claim = serve.streams[stack]
    held = {candidate_key(claim, j) for j in range(len(claim.hf_indices))}
    trained = {candidate_key(c, j) for c in train.streams.values() for j in range(len(c.hf_indices))}
    if held <= trained:
        return "", []
    near = set()
    for p in plans:
        claims = serve.streams[p.serve_stream].hf_indices
        for index in [k[0] for k in p.expected_keys if k is not None] + list(claims):
            near |= set(range(index - LAYER_REACH, index + LAYER_REACH + 1))
    wanted = [key for key in sorted(held) if key[0] in near]
    return (stack, wanted) if wanted else ("", [])


def _candidate_keys(train: Dump, plan: StreamPlan, num_layers: int) -> dict:
    """key -> (train stream, slice) for the train slices worth fitting against."""
    where: dict = {}
    for name, claim in train.streams.items():
        for j in range(len(claim.hf_indices)):
            where.setdefault(candidate_key(claim, j), (name, j))
    wanted = set()
    for key in plan.expected_keys:
        if key is not None:
            wanted |= {key, (key[0] - 1, "post"), (key[0] + 1, "post"), (key[0] + 2, "post"), (key[0] - 2, "post")}
    wanted |= {(num_layers, "pre"), (num_layers, "post")}
    if len(where) <= SMALL_TRAIN:  # a train side of few slices (a SpecForge dataset): all of them
        wanted |= set(where)
    # below N a key's norm is always "post" (mapping.candidate_key)
    wanted = {(i, n if i == num_layers else "post") for i, n in wanted}
    return {k: where[k] for k in sorted(wanted) if k in where}
