"""Pair samples by id (or by their tokens) and align their token ids, before any hidden state is looked at.

Samples pair by id where the two sides name them alike. Most foreign layouts carry no prompt ids (an
imported speculators or SpecForge folder names a sample by the hash of its tokens, a capture by its
prompt's id), so where ids pair fewer samples whose tokens agree than the token sequences themselves
do, samples pair by their tokens instead: the same sequence, or one side's sequence followed by a
run of one repeated id (a batch's right padding); repeats pair in order. The result says which.

For each paired sample the token ids are identical, shifted by k positions (serve token i is train
token i+k: a prefix-cache hit that returned only the suffix, or an extra BOS on one side), equal up to
a first divergent position, or one side carries extra trailing tokens (padding). States are then
compared only on the aligned rows, which :class:`Segment` records in flat row numbers.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np

from alignprobe.compare.result import TokenCheck, TokenIssue
from alignprobe.compare.sampling import spread_order
from alignprobe.dump import Dump

MAX_SHIFT = 8  # token shifts tried when the ids differ
EXAMPLES = 20  # unpaired ids listed in the result
MAX_ISSUES = 200  # per-sample token issues kept in the result (all are counted)


@dataclasses.dataclass
class Segment:
    """``length`` aligned rows: train flat row ``train_row`` and serve flat row ``serve_row`` onwards."""

    sample_id: str  # the train sample's id
    train_row: int
    serve_row: int
    length: int
    position: int  # position of the first row within the train sample
    serve_sample_id: str = ""  # the serve sample's id where samples paired by tokens (else the same id)

    @property
    def serve_id(self) -> str:
        return self.serve_sample_id or self.sample_id


@dataclasses.dataclass
class Alignment:
    kind: str  # "identical" | "shift" | "divergent" | "padding"
    train_offset: int
    serve_offset: int
    length: int
    shift: int = 0
    first_divergence: int = -1
    padded_side: str = ""


def align_tokens(train_ids: np.ndarray, serve_ids: np.ndarray, max_shift: int = MAX_SHIFT) -> Alignment:
    """How the serve token ids line up with the train token ids of one sample."""
    t, s = np.asarray(train_ids), np.asarray(serve_ids)
    n = min(len(t), len(s))
    differ = np.flatnonzero(t[:n] != s[:n])
    prefix = int(differ[0]) if len(differ) else n
    if prefix == n:
        if len(t) == len(s):
            return Alignment("identical", 0, 0, n)
        return Alignment("padding", 0, 0, n, padded_side="train" if len(t) > len(s) else "serve")
    for k in sorted((k for k in range(-max_shift, max_shift + 1) if k), key=abs):
        t_off, s_off = max(k, 0), max(-k, 0)
        overlap = min(len(t) - t_off, len(s) - s_off)
        # a shift must explain most of the shorter sample, not a few coincidental tokens
        if overlap >= max(4, (n + 1) // 2) and np.array_equal(t[t_off : t_off + overlap], s[s_off : s_off + overlap]):
            return Alignment("shift", t_off, s_off, overlap, shift=k)
    return Alignment("divergent", 0, 0, prefix, first_divergence=prefix)


def pair_samples(
    train: Dump,
    serve: Dump,
    *,
    sample: int | None = None,
    max_tokens: int | None = None,
    tokenizer: Any = None,
    load_tokenizer: Callable[[], Any] | None = None,
) -> tuple[TokenCheck, list[Segment]]:
    """Pair samples by id, align their tokens, and list the aligned rows to compare.

    ``sample`` keeps that many paired samples, evenly spread over the train order; ``max_tokens``
    keeps at most that many rows: whole samples taken in an order spread evenly over the train
    order (:func:`~alignprobe.compare.sampling.spread_order`) until the budget is filled, the last one
    taken cut short, so a small budget still sees the whole dump rather than its first samples.
    Both bound the work on large dumps and are reported (``check.alignable_*`` is what they chose from).
    ``tokenizer`` (anything with ``decode``) shows divergent tokens as text; ``load_tokenizer``
    returns one, and is called only when a divergent sample needs it (loading costs seconds).
    """
    # all token ids at once: 8 bytes a token, small beside the states, and one read instead of many
    train_tokens, serve_tokens = train.token_ids_flat(), serve.token_ids_flat()
    paired_by, pairs = sample_pairs(train, serve, train_tokens, serve_tokens)
    paired_train = {t for t, _ in pairs}
    paired_serve = {s for _, s in pairs}
    train_only = [sid for sid in train.sample_ids if sid not in paired_train]
    serve_only = [sid for sid in serve.sample_ids if sid not in paired_serve]
    check = TokenCheck(
        paired=len(pairs),
        paired_by=paired_by,
        train_only=len(train_only),
        serve_only=len(serve_only),
        train_only_examples=train_only[:EXAMPLES],
        serve_only_examples=serve_only[:EXAMPLES],
    )
    chosen = {t for t, _ in pairs}
    if sample is not None and sample < len(pairs):
        picks = np.unique(np.linspace(0, len(pairs) - 1, max(1, sample)).round().astype(int))
        chosen = {pairs[i][0] for i in picks}
    segments: list[Segment] = []
    for sid, serve_sid in pairs:
        (t0, t1), (s0, s1) = train.span(sid), serve.span(serve_sid)
        t_ids, s_ids = train_tokens[t0:t1], serve_tokens[s0:s1]
        al = align_tokens(t_ids, s_ids)
        if al.kind == "identical":
            check.identical += 1
        else:
            check.issue_counts[al.kind] = check.issue_counts.get(al.kind, 0) + 1
            if al.kind == "shift":
                check.shift_counts[str(al.shift)] = check.shift_counts.get(str(al.shift), 0) + 1
            if len(check.issues) < MAX_ISSUES:
                if tokenizer is None and load_tokenizer is not None and al.kind == "divergent":
                    tokenizer, load_tokenizer = load_tokenizer(), None
                check.issues.append(_issue(sid, al, t_ids, s_ids, tokenizer))
        al = _returned_only(al, _returned(train, sid), _returned(serve, serve_sid))
        if al.length <= 0:
            continue
        check.alignable_samples += 1
        check.alignable_tokens += al.length
        if sid in chosen:
            segments.append(Segment(sid, t0 + al.train_offset, s0 + al.serve_offset, al.length, al.train_offset,
                                    serve_sid if serve_sid != sid else ""))
    if max_tokens is not None:
        segments = _within_budget(segments, max_tokens)
    check.compared_samples = len(segments)
    check.aligned_tokens = sum(seg.length for seg in segments)
    return check, segments


def sample_pairs(train: Dump, serve: Dump, train_tokens: np.ndarray | None = None,
                 serve_tokens: np.ndarray | None = None) -> tuple[str, list[tuple[str, str]]]:
    """``(how, [(train id, serve id), ...])`` in train order: ``how`` is "id" or "tokens" (module doc).

    By id unless pairing by tokens pairs more samples whose tokens agree: a wrong prompt file whose
    ids happen to pair still pairs by id, and is then named by its divergent tokens."""
    train_tokens = train.token_ids_flat() if train_tokens is None else train_tokens
    serve_tokens = serve.token_ids_flat() if serve_tokens is None else serve_tokens
    serve_ids = set(serve.sample_ids)
    by_id = [(sid, sid) for sid in train.sample_ids if sid in serve_ids]
    agreeing = sum(_prefix_equal(_tokens(train, train_tokens, t), _tokens(serve, serve_tokens, s)) for t, s in by_id)
    if agreeing == len(train.sample_ids) or agreeing == len(serve.sample_ids):
        return "id", by_id  # nothing left that tokens could pair
    by_tokens = _pairs_by_tokens(train, serve, train_tokens, serve_tokens)
    return ("tokens", by_tokens) if len(by_tokens) > agreeing else ("id", by_id)


def _tokens(dump: Dump, flat: np.ndarray, sid: str) -> np.ndarray:
    start, stop = dump.span(sid)
    return flat[start:stop]


def _prefix_equal(a: np.ndarray, b: np.ndarray) -> bool:
    n = min(len(a), len(b))
    return bool(n) and bool(np.array_equal(a[:n], b[:n]))


def _pairs_by_tokens(train: Dump, serve: Dump, train_tokens: np.ndarray,
                     serve_tokens: np.ndarray) -> list[tuple[str, str]]:
    """Train samples paired with the serve samples of the same token sequence, repeats in order; then
    the rest where one sequence is the other followed by one repeated id (padding)."""
    waiting: dict[bytes, list[str]] = {}
    for sid in reversed(serve.sample_ids):  # popped from the end: serve order
        waiting.setdefault(_tokens(serve, serve_tokens, sid).tobytes(), []).append(sid)
    pairs: dict[str, str] = {}
    for sid in train.sample_ids:
        same = waiting.get(_tokens(train, train_tokens, sid).tobytes())
        if same:
            pairs[sid] = same.pop()
    left_train = [sid for sid in train.sample_ids if sid not in pairs]
    left_serve = [sid for ids in waiting.values() for sid in ids]
    if left_train and left_serve:
        pairs.update(_padded_pairs(train, serve, train_tokens, serve_tokens, left_train, left_serve))
    return [(sid, pairs[sid]) for sid in train.sample_ids if sid in pairs]


def _padded_pairs(train, serve, train_tokens, serve_tokens, left_train, left_serve) -> dict[str, str]:
    """Pairs where one side's tokens are the other's plus a tail of one repeated id, the only candidate
    either way (a shorter prompt that is a prefix of several is left unpaired rather than guessed)."""
    unpadded: dict[bytes, list[tuple[str, str]]] = {}
    for side, dump, flat, ids in (("train", train, train_tokens, left_train), ("serve", serve, serve_tokens, left_serve)):
        for sid in ids:
            seq = _tokens(dump, flat, sid)
            ends = np.flatnonzero(seq != seq[-1]) if len(seq) else np.zeros(0, dtype=np.int64)
            body = seq[: int(ends[-1]) + 1] if len(ends) else seq[:0]
            # a sample either is its body (no padding) or its body plus its tail: both keys are offered
            for key in {seq.tobytes(), body.tobytes()} if len(body) else {seq.tobytes()}:
                unpadded.setdefault(key, []).append((side, sid))
    out: dict[str, str] = {}
    used: set[str] = set()
    for members in unpadded.values():
        trains = [sid for side, sid in members if side == "train"]
        serves = [sid for side, sid in members if side == "serve"]
        if len(trains) == 1 and len(serves) == 1 and trains[0] not in out and serves[0] not in used:
            if _padded(_tokens(train, train_tokens, trains[0]), _tokens(serve, serve_tokens, serves[0])):
                out[trains[0]] = serves[0]
                used.add(serves[0])
    return out


def _padded(a: np.ndarray, b: np.ndarray) -> bool:
    """The shorter is a prefix of the longer, whose extra tail is one repeated id."""
    short, long = (a, b) if len(a) <= len(b) else (b, a)
    tail = long[len(short):]
    return len(short) > 0 and bool(np.array_equal(long[: len(short)], short)) and bool((tail == tail[0]).all())


def _returned(dump: Dump, sid: str) -> tuple[int, int] | None:
    """The rows ``[start, stop)`` of a sample the engine returned; the others are NaN placeholders of a
    short sample (dump/marks.py), left out of every comparison (diagnoses/short_rows.py names them).
    None for a dump without marks: every row was returned."""
    if getattr(dump, "marks", None) is None:  # getattr: a dump-like reader without marks
        return None
    return dump.mark(sid).returned


def _returned_only(al: Alignment, train: tuple[int, int] | None, serve: tuple[int, int] | None) -> Alignment:
    """``al`` cut to the rows both sides returned (a short sample keeps its suffix, the rows computed)."""
    first, last = 0, al.length  # aligned row i is train row train_offset + i, serve row serve_offset + i
    for returned, offset in ((train, al.train_offset), (serve, al.serve_offset)):
        if returned is not None:
            first, last = max(first, returned[0] - offset), min(last, returned[1] - offset)
    if (first, last) == (0, al.length):
        return al
    return dataclasses.replace(al, train_offset=al.train_offset + first, serve_offset=al.serve_offset + first,
                               length=max(0, last - first))


def _within_budget(segments: list[Segment], max_tokens: int) -> list[Segment]:
    """Whole segments in spread order until ``max_tokens`` rows, the last one cut; train order kept."""
    lengths = np.array([seg.length for seg in segments], dtype=np.int64)
    if lengths.sum() <= max_tokens:
        return segments
    order = spread_order(len(segments))
    filled = np.cumsum(lengths[order])
    taken = int(np.searchsorted(filled, max_tokens)) + 1  # the first prefix that reaches the budget
    keep = np.sort(order[:taken])
    last = int(order[taken - 1])
    cut = int(filled[taken - 1]) - max_tokens
    out = []
    for i in keep:
        seg = segments[int(i)]
        out.append(dataclasses.replace(seg, length=seg.length - cut) if i == last and cut else seg)
    return out


def _issue(sid: str, al: Alignment, t_ids: np.ndarray, s_ids: np.ndarray, tokenizer) -> TokenIssue:
    issue = TokenIssue(
        sample_id=sid,
        kind=al.kind,
        train_len=len(t_ids),
        serve_len=len(s_ids),
        aligned_length=al.length,
        shift=al.shift,
        first_divergence=al.first_divergence,
        padded_side=al.padded_side,
    )
    if al.kind == "divergent":
        p = al.first_divergence
        issue.train_token = int(t_ids[p]) if p < len(t_ids) else -1
        issue.serve_token = int(s_ids[p]) if p < len(s_ids) else -1
        if tokenizer is not None:
            issue.train_text = _decode(tokenizer, t_ids[max(0, p - 3) : p + 4])
            issue.serve_text = _decode(tokenizer, s_ids[max(0, p - 3) : p + 4])
    return issue


def _decode(tokenizer, ids: np.ndarray) -> str:
    try:
        return str(tokenizer.decode([int(i) for i in ids]))
    except Exception as exc:  # noqa: BLE001 - a tokenizer that cannot decode only loses the text
        return f"(cannot decode: {type(exc).__name__})"
