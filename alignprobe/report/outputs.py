"""Everything a gate run writes besides the terminal summary, in one call shared by compare and gate.

``write_outputs(result, ...)``: result.json (with the exit code and its reason; ``"-"`` writes it to
stdout), the report folder, the JUnit file, and GitHub's step summary and annotations where the run
is inside GitHub Actions.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Callable, Mapping, TextIO

from alignprobe.compare.result import CompareResult
from alignprobe.safe_paths import write_text_atomic
from alignprobe.exit_status import ExitStatus, exit_status, result_json

STDOUT = "-"


@dataclasses.dataclass
class Outputs:
    status: ExitStatus
    json: str | None = None  # the path written, or "-"
    report_html: str | None = None
    junit: str | None = None
    github: list[str] = dataclasses.field(default_factory=list)  # what was written for GitHub Actions
    notes: list[str] = dataclasses.field(default_factory=list)  # plots the report left out, and why


def checked_codes() -> list[str]:
    """Every finding class a comparison checks: the JUnit file lists each as a test case."""
    from alignprobe.findings import codes_of

    return codes_of("compare")


def write_outputs(
    result: CompareResult,
    *,
    strict: bool = False,
    json_path: str | os.PathLike | None = None,
    report_dir: str | os.PathLike | None = None,
    junit_path: str | os.PathLike | None = None,
    suite: str = "alignprobe compare",
    env: Mapping[str, str] | None = None,
    stdout: TextIO | None = None,
    echo: Callable[[str], None] | None = None,
) -> Outputs:
    status = exit_status(result, strict)
    out = Outputs(status)
    stdout = stdout or sys.stdout
    if json_path is not None:
        out.json = write_json(json_path, result_json(result, status), stdout)
    if report_dir is not None:
        from alignprobe.report.writer import write_report

        files = write_report(result, report_dir, exit=status)
        out.report_html, out.notes = files.html, files.notes
    if junit_path is not None:
        from alignprobe.report.junit import write_junit

        out.junit = write_junit(junit_path, result.findings, checked_codes(), suite=suite, strict=strict,
                                elapsed_s=result.elapsed_s,
                                properties={"verdict": result.verdict, "exit_code": str(status.code)})
    from alignprobe.report.github import publish

    out.github = publish(result, out.report_html, env=env, echo=echo or (lambda line: print(line, file=stdout)))
    return out


def write_json(path: str | os.PathLike, text: str, stdout: TextIO | None = None) -> str:
    """``text`` to ``path`` atomically, or to ``stdout`` for ``"-"``; returns the path."""
    path = os.fspath(path)
    if path == STDOUT:
        (stdout or sys.stdout).write(text + "\n")
        return path
    write_text_atomic(path, text, "--json")
    return path
