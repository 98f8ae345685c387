"""The one way alignprobe reads JSON (and TOML) that came from outside: files, dump attributes, server replies.

Whatever the text holds, the caller gets plain values or one :class:`BadInput` line naming ``where``:
- nesting deeper than :data:`MAX_DEPTH` is refused before any recursive code (the decoder, the
  dataclass rebuilders, ``json.dumps`` of provenance) can hit Python's recursion limit;
- ``NaN`` / ``Infinity`` literals, and numbers too large for a float (``1e999``, an integer of 400
  digits), are refused: no tolerance, size or cosine downstream means anything as one.
"""

from __future__ import annotations

import json
import math
import os
import re
from typing import Any

from alignprobe.errors import BadInput, first_line
from alignprobe.safe_paths import read_input_bytes

# Real configs, results and replies nest 6 levels at most; 64 leaves room and stays far from the
# recursion limit of every recursive walk over the value.
MAX_DEPTH = 64
# The largest integer a float holds to within rounding (~1.8e308); larger ones cannot be a tolerance,
# a count or a hidden state.
_FLOAT_MAX_INT = int(1.7976931348623157e308)
# A result.json of a huge comparison stays far below this; a larger file is not one we wrote.
MAX_RECORD_BYTES = 256 << 20


def loads_json(text: str | bytes, where: str) -> Any:
    """Decode JSON text from ``where`` (a path, ``path:line``, a URL), checked as the module says."""
    if isinstance(text, (bytes, bytearray, memoryview)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError:
            raise BadInput(f"{where}: not JSON (the bytes are not UTF-8 text)") from None
    outside_strings = _STRING.sub('""', text)
    _check_nesting(outside_strings, where)
    # Number hooks cost a call per number (a server reply holds millions), so they run only when a
    # number could be out of range: a 3-digit exponent or a 309-digit run.
    hooks = {"parse_float": _finite_float, "parse_int": _float_sized_int} if _HUGE.search(outside_strings) else {}
    try:
        return json.loads(text, parse_constant=_refuse_constant, **hooks)
    except json.JSONDecodeError as exc:
        raise BadInput(f"{where}: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except RecursionError:
        raise BadInput(f"{where}: JSON nested too deeply to read") from None
    except _OutOfRange as exc:
        raise BadInput(f"{where}: {exc}") from None


def load_json_file(path: str, what: str = "JSON file") -> Any:
    """Read and decode a JSON file (a regular file: see safe_paths.read_input_bytes)."""
    return loads_json(read_input_bytes(path, what), path)


# A model's or a drafter's config.json, read by load_json_file as a JSON object: required (a bad one is
# one line, worded for its reader) or, where it only helps (an engine's model folder), None if absent.

def read_config(path: str | os.PathLike, what: str = "config file", noun: str = "a config") -> dict[str, Any]:
    """``path``'s config.json (``path``: a folder holding it, or the file)."""
    path = os.fspath(path)
    if os.path.isdir(path):
        path = os.path.join(path, "config.json")
    config = load_json_file(path, what)
    if not isinstance(config, dict):
        raise BadInput(f"{path}: {noun} is a JSON object, got {type(config).__name__}")
    return config


def flag_config(path: str, flag: str, folder: str) -> dict[str, Any]:
    """The config.json of the ``folder`` (what kind of model folder) given as ``flag``, refused naming the flag."""
    name = os.path.join(path, "config.json")
    if not os.path.isfile(name):
        raise BadInput(f"{flag} {path}: no config.json there (give the {folder} folder)")
    config = load_json_file(name, f"{flag} config.json")
    if not isinstance(config, dict):
        raise BadInput(f"{flag} {name}: not a JSON object")
    return config


def local_config(path: str) -> dict[str, Any] | None:
    """``path/config.json`` where ``path`` is a local model folder holding one (never the network), if a JSON object."""
    name = os.path.join(path, "config.json")
    config = load_json_file(name, "config.json") if path and os.path.isfile(name) else None
    return config if isinstance(config, dict) else None


def replaceable_by_json(path: str) -> bool:
    """True when ``path`` may receive a JSON record written without the command's own checks (the
    error object of a run that stopped early): a new file in an existing folder, or a JSON object
    alignprobe wrote before (a result or an error record). Never an input dump, a prompt file, a FIFO."""
    if not os.path.lexists(path):
        return os.path.isdir(os.path.dirname(os.path.abspath(path)))
    try:
        record = loads_json(read_input_bytes(path, "JSON record", limit=MAX_RECORD_BYTES), path)
    except BadInput:
        return False
    return isinstance(record, dict) and ("verdict" in record or "error" in record)


def loads_toml(text: str | bytes, where: str) -> Any:
    """Decode TOML from ``where`` with the same limits as :func:`loads_json`."""
    import tomllib

    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError:
            raise BadInput(f"{where}: not TOML (the bytes are not UTF-8 text)") from None
    _check_nesting(_STRING.sub('""', text), where)
    try:
        value = tomllib.loads(text, parse_float=_finite_float)
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{where}: not valid TOML ({first_line(exc)})") from None
    except RecursionError:
        raise BadInput(f"{where}: TOML nested too deeply to read") from None
    except _OutOfRange as exc:
        raise BadInput(f"{where}: {exc}") from None
    check_plain(value, where)
    return value


def check_plain(value: Any, where: str) -> None:
    """Refuse non-finite floats and out-of-range integers in an already decoded value (TOML, or
    ``json.loads`` output from elsewhere), without recursion."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise BadInput(f"{where}: nested deeper than {MAX_DEPTH} levels")
        if isinstance(item, float) and not math.isfinite(item):
            raise BadInput(f"{where}: holds {item}, which is not a finite number")
        if isinstance(item, int) and not isinstance(item, bool) and abs(item) > _FLOAT_MAX_INT:
            raise BadInput(f"{where}: holds an integer of {len(str(abs(item)))} digits, too large to use")
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)


class _OutOfRange(ValueError):
    pass


def _refuse_constant(name: str):
    raise _OutOfRange(f"holds {name}, which is not a finite number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _OutOfRange(f"holds {text[:40]}, which is not a finite number (too large for a float, or NaN)")
    return value


def _float_sized_int(text: str) -> int:
    # Python's int() refuses more than 4300 digits itself (ValueError); check length before it does.
    if len(text.lstrip("-")) > 309 or abs(int(text)) > _FLOAT_MAX_INT:
        raise _OutOfRange(f"holds an integer of {len(text.lstrip('-'))} digits, too large to use")
    return int(text)


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_HUGE = re.compile(r"[eE][+-]?\d{3}|\d{309}")


def _check_nesting(text: str, where: str) -> None:
    """Bracket depth of ``text`` (strings already blanked) in one vectorised pass, so a 10^6-deep
    ``[[[[`` is refused before the decoder recurses."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return
    import numpy as np

    codes = np.frombuffer(text.encode("utf-8", "replace"), dtype=np.uint8)
    step = np.zeros(256, dtype=np.int8)
    step[[ord("["), ord("{")]] = 1
    step[[ord("]"), ord("}")]] = -1
    if int(np.cumsum(step[codes], dtype=np.int64).max(initial=0)) > MAX_DEPTH:
        raise BadInput(f"{where}: nested deeper than {MAX_DEPTH} levels; no file alignprobe reads nests so deep")
