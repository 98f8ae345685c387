"""How a judged run ends: its exit code and the reason, one record the CLI and every JSON share.

A machine reading ``result.json`` should not need the process status (or stderr) to know how the run
ended, so the JSON carries ``exit_code`` and ``exit_reason`` beside the result; a run that never got a
result (bad input) writes the same two keys, ``verdict: null`` and an ``error``.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Sequence

from alignprobe.errors import EXIT_BAD_INPUT, EXIT_FAIL, EXIT_INTERRUPTED, EXIT_PASS
from alignprobe.findings.record import Finding
from alignprobe.findings.severity import SEVERITY_RANK


@dataclasses.dataclass(frozen=True)
class ExitStatus:
    code: int
    reason: str

    def __bool__(self) -> bool:
        return self.code == EXIT_PASS


def passed(verdict: str, strict: bool = False) -> bool:
    """A WARN passes (exit 0) unless ``strict``; a FAIL never does."""
    return verdict == "PASS" if strict else verdict != "FAIL"


def exit_status(verdict: str, findings: Sequence[Finding], strict: bool = False) -> ExitStatus:
    """0 on PASS (and WARN unless ``strict``), 1 otherwise; the reason names the codes that decided it."""
    def codes(floor: str) -> list[str]:
        return list(dict.fromkeys(f.code for f in findings if SEVERITY_RANK[f.severity] >= SEVERITY_RANK[floor]))

    if passed(verdict, strict):
        warned = codes("warn")
        if warned:
            return ExitStatus(EXIT_PASS, f"WARN passes without --strict ({', '.join(warned)})")
        return ExitStatus(EXIT_PASS, "PASS: no finding at warn or error")
    floor = "warn" if strict and verdict == "WARN" else "error"
    strict_note = " with --strict" if floor == "warn" else ""
    return ExitStatus(EXIT_FAIL, f"{verdict}{strict_note}: {', '.join(codes(floor))}")


def with_status(record: dict[str, Any], status: ExitStatus) -> dict[str, Any]:
    """A result's JSON record with ``exit_code`` and ``exit_reason`` added."""
    return {**record, "exit_code": status.code, "exit_reason": status.reason}


def error_reason(code: int) -> str:
    """The exit reason of a run that stopped before a result, by its exit code."""
    return ("bad input or usage" if code == EXIT_BAD_INPUT else "interrupted" if code == EXIT_INTERRUPTED
            else "internal error")


def error_record(message: str, code: int = EXIT_BAD_INPUT) -> dict[str, Any]:
    """What a result file holds when the run stopped before a result: no verdict, the one-line error."""
    return {"verdict": None, "exit_code": code, "exit_reason": error_reason(code), "error": message}


def error_json(message: str, code: int = EXIT_BAD_INPUT) -> str:
    return json.dumps(error_record(message, code), indent=2)
