"""Read a result.json back (``alignprobe report``), with one-line errors for files that are not one."""

from __future__ import annotations

import os

from alignprobe.compare.result import CompareResult
from alignprobe.compare.result_types import check_result_types
from alignprobe.errors import BadInput, first_line
from alignprobe.safe_json import load_json_file


def load_result(path: str | os.PathLike) -> CompareResult:
    path = os.fspath(path)
    if not os.path.lexists(path):
        raise BadInput(f"{path}: no such file; give the result.json that `alignprobe compare --json` or --report wrote")
    raw = load_json_file(path, "result.json")
    if isinstance(raw, dict) and raw.get("error") and raw.get("verdict") is None:
        raise BadInput(f"{path}: the run that wrote it stopped before a result ({first_line(str(raw['error']))})")
    if not isinstance(raw, dict) or "verdict" not in raw or "findings" not in raw:
        raise BadInput(f"{path}: JSON, but not an alignprobe compare result (no verdict/findings)")
    check_result_types(CompareResult, raw, path)
    try:
        return CompareResult.from_dict(raw)
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError) as exc:
        raise BadInput(f"{path}: an alignprobe result this version cannot read ({type(exc).__name__}: {first_line(exc)})") from None
