"""Decode a ``/generate`` answer fast: the prefill rows go straight from JSON text into float32.

SGLang sends hidden states as decimal JSON (~20 bytes a value, REAL_ENGINES.md): a Kimi-width
reply (3 x 7168 values a token) is ~430 KB a token, and the standard library's json plus numpy
decodes it at ~30 MB/s. msgspec parses only the fields named below and skips the rest without
building them; the decode-token entries after the prefill are kept as raw bytes and never parsed.
Measured on a 100-token reply of width 21504 (42 MB): json 1.8 s, orjson 0.34 s, msgspec 0.30 s
(benchmarks/sglang_capture_throughput.py measures the whole capture against the raw transfer).
"""

from __future__ import annotations

from typing import Any, Optional, Union

import msgspec
import numpy as np


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


def decode_generate(content: bytes) -> Any:
    """A /generate answer as ``{"meta_info": {"hidden_states": [float32 rows], "cached_tokens": n}}``.

    Only the prefill entry (element 0) is decoded; a batch answer of one is unwrapped. The shape is
    the dict the offline Engine also answers, so both backends share one validation (prefill_rows).
    """
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
    if states:
        states = [_prefill(states[0])]
    return {"meta_info": {"hidden_states": states, "cached_tokens": meta.cached_tokens}}


def _prefill(raw: msgspec.Raw) -> np.ndarray | None:
    """The prefill rows as float32, null read as NaN; None when they are not rows of numbers."""
    try:
        return np.asarray(_ROWS.decode(raw), dtype=np.float32)
    except msgspec.ValidationError:
        pass  # perhaps a null (a NaN or Inf on the server); anything else fails again below
    except (msgspec.DecodeError, ValueError, RecursionError):  # ValueError: ragged rows
        return None  # prefill_rows names the bad shape
    try:
        rows = _ROWS_WITH_NULLS.decode(raw)
        return np.asarray(rows, dtype=object).astype(np.float32)  # None -> nan
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError, TypeError, RecursionError):
        return None
