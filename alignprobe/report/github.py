"""GitHub Actions outputs: the job's step summary and ``::error`` / ``::warning`` annotations.

Both follow GitHub's documented workflow commands: the step summary is Markdown appended to the file
named by ``GITHUB_STEP_SUMMARY``; an annotation is a line ``::error title=T::message`` on stdout, read
only where ``GITHUB_ACTIONS=true``. Elsewhere nothing is written, so a terminal shows no such lines.
"""

from __future__ import annotations

import os
from typing import Callable, Mapping

from alignprobe.compare.result import CompareResult
from alignprobe.findings import Finding, render
from alignprobe.report.markdown import render_markdown

ANNOTATED = {"error": "error", "warn": "warning"}  # notes (info) stay in the summary only


def annotation(finding: Finding) -> str:
    """One workflow command line for a finding at warn or error."""
    title = _property(f"alignprobe {finding.code} {render.where(finding)}".rstrip())
    fix = render.fix(finding)
    message = render.title(finding) + (f"\nFix: {fix}" if fix else "")
    return f"::{ANNOTATED[finding.severity]} title={title}::{_data(message)}"


def annotations(result: CompareResult) -> list[str]:
    return [annotation(f) for f in result.findings if f.severity in ANNOTATED]


def publish(
    result: CompareResult,
    report_html: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    echo: Callable[[str], None] = print,
) -> list[str]:
    """Write what GitHub Actions reads, where it reads it; returns what was done, one line each."""
    env = os.environ if env is None else env
    done = []
    summary_path = env.get("GITHUB_STEP_SUMMARY")
    if summary_path:
        text = render_markdown(result, report_html or "report.html")
        try:
            with open(summary_path, "a", encoding="utf-8") as fh:
                fh.write(text + "\n")
            done.append(f"step summary appended to {summary_path}")
        except OSError as exc:  # the summary is a courtesy: the verdict must still reach the log
            done.append(f"step summary not written ({exc.strerror or exc})")
    if env.get("GITHUB_ACTIONS") == "true":
        lines = annotations(result)
        for line in lines:
            echo(line)
        done.append(f"{len(lines)} annotation(s)")
    return done


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")
