"""JSON rows of numbers (``[[...], ...]`` or one ``[...]``) straight into float32, by simdjson.

The SGLang decoder's fast path (probes/sglang_decode.py). simdjson parses a number-only document
about 3x faster than msgspec builds Python floats from it, and both round every decimal correctly to
float64 (as Python's ``float`` does), so after the same cast to float32 every value is the same bit
for bit (tests/probes/test_json_rows.py checks it on adversarial numbers).

``None`` means "not here": text that is not plain rows of numbers (a null for a NaN, an integer past
64 bits, a row nested deeper, ragged rows) goes back to the msgspec decoder, which decides it as before.
"""

from __future__ import annotations

import threading

import numpy as np
import simdjson

# One parser a thread, kept: a fresh parser allocates its tape (~16 bytes a number) on every answer.
_LOCAL = threading.local()
_WHITESPACE = b" \t\n\r"
# Rows shorter than this (on average) are parsed in one go: a parse a row costs a few microseconds
# of calls, which only rows of thousands of values repay (Kimi width: ~430 KB a row).
ROW_BYTES = 16 << 10


def rows_end(text: bytes, start: int) -> tuple[int, list[tuple[int, int]] | None] | None:
    """Where the rows that open at ``text[start]`` end (one past their last ``]``), and each row's
    ``(start, end)`` (None for one vector, not rows: ``[...]`` rather than ``[[...], ...]``); None if
    the brackets there are shaped otherwise.

    Only brackets are looked at, each found by ``bytes.find`` (memchr speed): a row holds no ``[``,
    rows are separated by commas, and nothing is nested deeper. Whether what lies between them are
    numbers is simdjson's to say."""
    if text[start : start + 1] != b"[":
        return None
    first = skip_whitespace(text, start + 1)
    if text[first : first + 1] != b"[":
        end = text.find(b"]", start)
        return None if end < 0 or 0 <= text.find(b"[", start + 1, end) else (end + 1, None)
    rows = []
    row = first
    while True:
        end = text.find(b"]", row)
        if end < 0 or 0 <= text.find(b"[", row + 1, end):
            return None
        rows.append((row, end + 1))
        after = skip_whitespace(text, end + 1)
        if text[after : after + 1] == b"]":
            return after + 1, rows
        if text[after : after + 1] != b",":
            return None
        row = skip_whitespace(text, after + 1)
        if text[row : row + 1] != b"[":
            return None


def float32_rows(text, start: int, end: int, rows: list[tuple[int, int]] | None) -> np.ndarray | None:
    """``text[start:end]`` (bytes or a buffer; ``start``, ``end`` and ``rows`` from :func:`rows_end`)
    as float32 ``[rows, width]``, or ``[width]`` for one vector; None when a value is not a number
    simdjson takes, or rows are ragged.

    Rows are parsed one at a time: between them another thread (the one reading the next answer off
    the socket) gets the GIL, where one parse of the whole answer would hold it for ~60 ms."""
    view = memoryview(text)
    if rows is None:
        values = _float64s(view[start:end])
        return None if values is None else _float32(values)
    if (end - start) < ROW_BYTES * len(rows):  # short rows: one parse, not one a row
        return _whole(view[start:end], len(rows))
    out = None
    for index, (row_start, row_end) in enumerate(rows):
        values = _float64s(view[row_start:row_end])
        if values is None:
            return None
        if out is None:
            out = np.empty((len(rows), values.size), dtype=np.float32)
        elif values.size != out.shape[1]:
            return None  # ragged
        with np.errstate(over="ignore"):  # past float32's range is inf, as numpy casts msgspec's floats too
            out[index] = values
    return out


def _whole(text, count: int) -> np.ndarray | None:
    """``count`` rows (each ``[...]`` of numbers, rows_end saw to it) parsed at once."""
    parser = _parser()
    try:
        top = parser.parse(text)
        if not isinstance(top, simdjson.Array):
            return None  # unreachable (rows_end saw brackets), but the types say so
        values = np.frombuffer(top.as_buffer(of_type="d"), dtype=np.float64)  # raises on a non-number
        widths = {len(row) if isinstance(row, simdjson.Array) else -1 for row in top}  # rows, by rows_end
        del top  # the parser is reused only once no proxy of its document is left
    except (ValueError, TypeError, RuntimeError):  # simdjson's errors: not JSON, not a number, too big
        _LOCAL.parser = simdjson.Parser()  # a proxy of the old one may live on in the traceback
        return None
    if len(widths) != 1 or values.size != count * next(iter(widths)):
        return None  # ragged
    return _float32(values).reshape(count, -1) if values.size else np.empty((count, 0), np.float32)


def _float64s(row) -> np.ndarray | None:
    """One ``[...]`` of numbers (no nested brackets: rows_end saw to it) as float64; None if simdjson
    refuses it or a value is not a number."""
    parser = _parser()
    try:
        top = parser.parse(row)
        if not isinstance(top, simdjson.Array):
            return None  # rows_end saw brackets around the text: unreachable, but the types say so
        values = np.frombuffer(top.as_buffer(of_type="d"), dtype=np.float64)  # raises on a non-number
        del top  # the parser is reused only once no proxy of its document is left
    except (ValueError, TypeError, RuntimeError):  # simdjson's errors: not JSON, not a number, too big
        _LOCAL.parser = simdjson.Parser()  # a proxy of the old one may live on in the traceback
        return None
    return values


def _float32(values: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return values.astype(np.float32)


def skip_whitespace(text: bytes, at: int) -> int:
    """The first position from ``at`` that is not JSON whitespace (or the end)."""
    while text[at : at + 1] and text[at] in _WHITESPACE:
        at += 1
    return at


def _parser() -> simdjson.Parser:
    parser = getattr(_LOCAL, "parser", None)
    if parser is None:
        parser = _LOCAL.parser = simdjson.Parser()
    return parser
