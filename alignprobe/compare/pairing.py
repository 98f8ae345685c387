"""Pair samples by id and align their token ids, before any hidden state is looked at.

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

    sample_id: str
    train_row: int
    serve_row: int
    length: int
    position: int  # position of the first row within the train sample


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
    serve_ids = set(serve.sample_ids)
    train_ids = set(train.sample_ids)
    paired = [sid for sid in train.sample_ids if sid in serve_ids]
    train_only = [sid for sid in train.sample_ids if sid not in serve_ids]
    serve_only = [sid for sid in serve.sample_ids if sid not in train_ids]
    check = TokenCheck(
        paired=len(paired),
        train_only=len(train_only),
        serve_only=len(serve_only),
        train_only_examples=train_only[:EXAMPLES],
        serve_only_examples=serve_only[:EXAMPLES],
    )
    chosen = set(paired)
    if sample is not None and sample < len(paired):
        picks = np.unique(np.linspace(0, len(paired) - 1, max(1, sample)).round().astype(int))
        chosen = {paired[i] for i in picks}
    # all token ids at once: 8 bytes a token, small beside the states, and one read instead of many
    train_tokens, serve_tokens = train.token_ids_flat(), serve.token_ids_flat()
    segments: list[Segment] = []
    for sid in paired:
        t0, s0 = train.span(sid)[0], serve.span(sid)[0]
        t_ids = train_tokens[t0 : train.span(sid)[1]]
        s_ids = serve_tokens[s0 : serve.span(sid)[1]]
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
        al = _returned_only(al, _returned(train, sid), _returned(serve, sid))
        if al.length <= 0:
            continue
        check.alignable_samples += 1
        check.alignable_tokens += al.length
        if sid in chosen:
            segments.append(Segment(sid, t0 + al.train_offset, s0 + al.serve_offset, al.length, al.train_offset))
    if max_tokens is not None:
        segments = _within_budget(segments, max_tokens)
    check.compared_samples = len(segments)
    check.aligned_tokens = sum(seg.length for seg in segments)
    return check, segments


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
