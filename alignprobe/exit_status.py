"""The exit code of a gate run and the reason for it, as one record the CLI and the JSON share.

A machine reading ``result.json`` should not need the process status (or stderr) to know how the run
ended, so the JSON carries ``exit_code`` and ``exit_reason`` beside the result; a run that never got a
result (bad input) writes the same two keys and an ``error``.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from alignprobe.compare.result import CompareResult
from alignprobe.errors import EXIT_BAD_INPUT, EXIT_FAIL, EXIT_PASS


@dataclasses.dataclass
class ExitStatus:
    code: int
    reason: str

    def __bool__(self) -> bool:
        return self.code == EXIT_PASS


def exit_status(result: CompareResult, strict: bool = False) -> ExitStatus:
    """0 on PASS (and WARN unless ``strict``), 1 otherwise; the reason names the findings that decided it."""
    if result.passed(strict=strict):
        warned = result.codes("warn")
        if warned:
            return ExitStatus(EXIT_PASS, f"WARN passes without --strict ({', '.join(warned)})")
        return ExitStatus(EXIT_PASS, "PASS: no finding at warn or error")
    floor = "warn" if strict and result.verdict == "WARN" else "error"
    codes = result.codes(floor)
    strict_note = " with --strict" if floor == "warn" else ""
    return ExitStatus(EXIT_FAIL, f"{result.verdict}{strict_note}: {', '.join(codes)}")


def result_record(result: CompareResult, status: ExitStatus) -> dict[str, Any]:
    """The result as ``--json`` writes it: its own fields plus ``exit_code`` and ``exit_reason``."""
    return {**result.to_dict(), "exit_code": status.code, "exit_reason": status.reason}


def result_json(result: CompareResult, status: ExitStatus) -> str:
    return json.dumps(result_record(result, status), indent=2, allow_nan=False)


def error_json(message: str, code: int = EXIT_BAD_INPUT) -> str:
    """What ``--json`` holds when the run stopped before a result: no verdict, the one-line error."""
    reason = "bad input or usage" if code == EXIT_BAD_INPUT else "interrupted" if code == 130 else "internal error"
    return json.dumps({"verdict": None, "exit_code": code, "exit_reason": reason, "error": message}, indent=2)
