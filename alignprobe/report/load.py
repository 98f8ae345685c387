"""Read a result.json back (``alignprobe report``), with one-line errors for files that are not one."""

from __future__ import annotations

import json
import os

from alignprobe.compare.result import CompareResult
from alignprobe.errors import BadInput


def load_result(path: str | os.PathLike) -> CompareResult:
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise BadInput(f"{path}: no such file; give the result.json that `alignprobe compare --json` or --report wrote")
    try:
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadInput(f"{path}: not JSON ({exc}); give the result.json that alignprobe compare wrote") from None
    if isinstance(raw, dict) and raw.get("error") and raw.get("verdict") is None:
        raise BadInput(f"{path}: the run that wrote it stopped before a result ({raw['error']})")
    if not isinstance(raw, dict) or "verdict" not in raw or "findings" not in raw:
        raise BadInput(f"{path}: JSON, but not an alignprobe compare result (no verdict/findings)")
    try:
        return CompareResult.from_dict(raw)
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise BadInput(f"{path}: an alignprobe result this version cannot read ({type(exc).__name__}: {exc})") from None
