"""Decode a ``/generate`` answer fast: the prefill rows go straight from JSON text into float32.

SGLang sends hidden states as decimal JSON (~20 bytes a value, as a real SGLang 0.5.23 writes them):
a Kimi-width reply (3 x 7168 values a token) is ~430 KB a token, and the standard library's json plus numpy
decodes it at ~30 MB/s. msgspec parses only the fields named below and skips the rest without
building them; the decode-token entries after the prefill are kept as raw bytes and never parsed.
Measured on a 100-token reply of width 21504 (42 MB): json 1.8 s, orjson 0.34 s, msgspec 0.30 s
(benchmarks/sglang_capture_throughput.py measures the whole capture against the raw transfer).

That msgspec decoder is still the one that decides what an answer means; a faster path in front of
it only saves it work. It finds the prefill's text by its brackets (probes/json_rows.py), parses
those numbers with simdjson, and has msgspec decode everything else: the answer with the prefill's
text swapped for a short stand-in, twice, with two different stand-ins. Only the prefill's own text
can come back as each stand-in, so the rows are the ones msgspec would have found, and the rest of the
answer (meta_info, cached_tokens, errors) is msgspec's own. Anything else (a null for a NaN, text the
brackets do not fit) falls back to the msgspec decoder as a whole: :func:`msgspec_answer`.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Union

import msgspec
import numpy as np

from alignprobe.probes.json_rows import float32_rows, rows_end, skip_whitespace


class _MetaInfo(msgspec.Struct):
    hidden_states: Optional[list[msgspec.Raw]] = None
    cached_tokens: Optional[int] = None


class _Answer(msgspec.Struct):
    meta_info: Optional[_MetaInfo] = None


_ANSWER = msgspec.json.Decoder(Union[_Answer, list[_Answer]])
_ROWS = msgspec.json.Decoder(list[Union[list[float], float]])  # [tokens][width], or [width] for one token
# SGLang answers through orjson, which writes NaN and +-Inf as null (measured with the sglang venv's
# orjson: [nan, inf, 1.0] -> [null,null,1.0]): rows holding null are read again, null as NaN. Only
# answers that hold a null pay for this second, slower decode.
_ROWS_WITH_NULLS = msgspec.json.Decoder(list[Union[list[Optional[float]], Optional[float]]])


class NotAnAnswer(ValueError):
    """The bytes are not JSON, or not shaped like a /generate answer."""


_KEY = b'"hidden_states"'
_STAND_INS = (b"[]", b"[0]")


def decode_generate(content: bytes) -> Any:
    """A /generate answer as ``{"meta_info": {"hidden_states": [float32 rows], "cached_tokens": n}}``.

    Only the prefill entry (element 0) is decoded; a batch answer of one is unwrapped. The shape is
    the dict the offline Engine also answers, so both backends share one validation (prefill_rows).
    The same as :func:`msgspec_answer`, value for value and error for error, only faster.
    """
    return _fast_answer(content) or msgspec_answer(content)


def _fast_answer(content: bytes) -> dict | None:
    """The answer by simdjson for the prefill's numbers and msgspec for the rest; None to leave it
    to :func:`msgspec_answer` (anything this path is not sure of)."""
    key = content.find(_KEY)
    start = _value_after_key(content, key + len(_KEY)) if key >= 0 else None
    if start is None or content[start : start + 1] != b"[":
        return None
    start = skip_whitespace(content, start + 1)  # element 0 of hidden_states
    found = rows_end(content, start)
    if found is None:
        return None
    end, rows_found = found
    for stand_in in _STAND_INS:
        try:
            answer = msgspec_answer(content[:start] + stand_in + content[end:], rows=bytes)
        except NotAnAnswer:
            return None
        states = answer["meta_info"]["hidden_states"]
        if not states or states[0] != stand_in:
            return None  # the brackets found were not element 0 of meta_info.hidden_states
    rows = float32_rows(content, start, end, rows_found)
    if rows is None:
        return None
    answer["meta_info"]["hidden_states"] = [rows]
    return answer


def msgspec_answer(content: bytes, rows: Callable[[msgspec.Raw], Any] | None = None) -> Any:
    """:func:`decode_generate` by msgspec alone, the decoder before simdjson; ``rows`` turns the
    prefill's text into what the answer holds (default: float32 rows by msgspec)."""
    try:
        answer = _ANSWER.decode(content)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:  # RecursionError: nested too deep
        raise NotAnAnswer(str(exc)) from None
    if isinstance(answer, list):
        if len(answer) != 1:
            raise NotAnAnswer(f"a batch of {len(answer)} answers for one request")
        answer = answer[0]
    meta = answer.meta_info
    if meta is None:  # every /generate answer has one; JSON without it is something else answering
        raise NotAnAnswer("no meta_info")
    states = meta.hidden_states
    prefill = [(rows or _prefill)(states[0])] if states else states
    return {"meta_info": {"hidden_states": prefill, "cached_tokens": meta.cached_tokens}}


def _prefill(raw: msgspec.Raw) -> np.ndarray | None:
    """The prefill rows as float32, null read as NaN; None when they are not rows of numbers."""
    try:
        with np.errstate(over="ignore"):  # past float32's range is inf (the nonfinite checks name it), not a warning
            return np.asarray(_ROWS.decode(raw), dtype=np.float32)
    except msgspec.ValidationError:
        pass  # perhaps a null (a NaN or Inf on the server); anything else fails again below
    except (msgspec.DecodeError, ValueError, RecursionError):  # ValueError: ragged rows
        return None  # prefill_rows names the bad shape
    try:
        rows = _ROWS_WITH_NULLS.decode(raw)
        with np.errstate(over="ignore"):
            return np.asarray(rows, dtype=object).astype(np.float32)  # None -> nan
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError, TypeError, RecursionError):
        return None


def _value_after_key(content: bytes, at: int) -> int | None:
    at = skip_whitespace(content, at)
    return skip_whitespace(content, at + 1) if content[at : at + 1] == b":" else None

