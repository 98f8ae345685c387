"""Check a decoded result.json against the result dataclasses' field types, before rebuilding it.

``alignprobe report`` takes a result.json from anywhere: a hand-edited or foreign file whose
``evidence`` is a list, whose ``tokens`` is a number or whose labels are null must be refused with
one line naming the field, not crash the renderer later. The field types are read from the
dataclasses themselves, so a new field is checked without a change here.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from alignprobe.errors import BadInput

# How result.json writes non-finite floats (result._jsonable).
_FLOAT_WORDS = ("inf", "-inf", "nan")
_SAME_IN_JSON = {"Severity": "str"}  # a Literal of strings


def check_result_types(cls, raw: Any, where: str) -> None:
    """One BadInput line for the first field of ``raw`` whose type does not match ``cls``'s."""
    from alignprobe.compare import result as module
    from alignprobe.findings import Note

    _check_record(cls, raw, "result", where, {**vars(module), "Note": Note})


def _fields(cls) -> dict[str, Any]:
    """Each field's type as its JSON form holds it: a finding's subject is written as stream and slices
    (findings/render.py to_dict)."""
    from alignprobe.findings import Finding

    types: dict[str, Any] = {f.name: f.type for f in dataclasses.fields(cls)}
    if cls is Finding:
        del types["subject"]
        types.update(stream="str", slices="list[str]")
    return types


def _check_record(cls, raw: Any, path: str, where: str, names: dict) -> None:
    if not isinstance(raw, dict):
        _refuse(where, path, "a JSON object", raw)
    for name, kind in _fields(cls).items():
        if name in raw:
            _check_value(kind, raw[name], f"{path}.{name}", where, names)


def _check_value(kind: str, value: Any, path: str, where: str, names: dict) -> None:
    kind = kind.strip()
    kind = _SAME_IN_JSON.get(kind, kind)
    if kind.startswith("Mapping["):
        kind = "dict[" + kind[len("Mapping["):]
    if kind.startswith("tuple[") and kind.endswith(", ...]"):
        kind = "list[" + kind[len("tuple["):-len(", ...]")] + "]"
    if kind.endswith("| None"):
        if value is not None:
            _check_value(kind[: -len("| None")], value, path, where, names)
        return
    if kind.startswith("list[") and kind.endswith("]"):
        if not isinstance(value, list):
            _refuse(where, path, "a list", value)
        for i, item in enumerate(value):
            _check_value(kind[5:-1], item, f"{path}[{i}]", where, names)
        return
    if kind.startswith("dict[") and kind.endswith("]"):
        if not isinstance(value, dict):
            _refuse(where, path, "a JSON object", value)
        inner = kind[5:-1].split(",", 1)[1].strip()
        if inner != "Any":
            for key, item in value.items():
                _check_value(inner, item, f"{path}.{key}", where, names)
        return
    if kind == "str":
        ok = isinstance(value, str)
    elif kind == "int":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif kind == "float":
        ok = (isinstance(value, (int, float)) and not isinstance(value, bool)) or value in _FLOAT_WORDS
    elif kind == "bool":
        ok = isinstance(value, bool)
    elif kind == "Any":
        ok = True
    elif kind in names and dataclasses.is_dataclass(names[kind]):
        _check_record(names[kind], value, path, where, names)
        return
    else:  # a type this checker does not know: the rebuild will judge it
        return
    if not ok:
        _refuse(where, path, f"a {kind}" if kind != "int" else "an integer", value)


def _refuse(where: str, path: str, wanted: str, value: Any) -> None:
    shown = "null" if value is None else type(value).__name__
    raise BadInput(f"{where}: {path} must be {wanted}, got {shown}; give the result.json that alignprobe compare wrote")
