"""``alignprobe audit PATH...``: every sample of a training set read once; data faults named; the gate."""

from __future__ import annotations

import os

import click

from alignprobe.cli.json_output import forget_json_path, json_option, people_echo
from alignprobe.errors import EXIT_FAIL, EXIT_PASS, BadInput

JOURNAL_NAME = "audit.journal.jsonl"


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@json_option("Write the full result here.")
@click.option("--report", "report_dir", type=click.Path(file_okay=False),
              help="Write report.html, summary.md, result.json and junit.xml into this folder.")
@click.option("--junit", "junit_path", type=click.Path(dir_okay=False), help="Write a JUnit XML file here.")
@click.option("--workers", type=click.IntRange(min=1), help="Run a local Dask cluster of N worker processes.")
@click.option("--scheduler", metavar="ADDRESS", help="Use an existing Dask scheduler (tcp://host:8786); the "
              "workers must see the files at the same paths.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override one audit threshold, e.g. --set norm_outlier_sigmas=10 (docs/audit.md).")
@click.option("--strict", is_flag=True, help="Exit 1 on WARN too, not only on FAIL.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
def audit(paths, json_path, report_dir, junit_path, workers, scheduler, overrides, strict, no_progress) -> int:
    """Audit training sets in place (dumps, SpecForge, speculators folders); exit 0 pass/warn, 1 fail, 2 bad input.

    A killed audit run again with the same --report / --json resumes: finished units are in a journal
    beside the output and are not read again."""
    from alignprobe.audit import AuditPolicy
    from alignprobe.audit import audit as run_audit
    from alignprobe.audit.render.junit import render_junit
    from alignprobe.audit.render.markdown import format_summary
    from alignprobe.audit.render.writer import write_audit_report
    from alignprobe.findings.tolerances import parse_overrides
    from alignprobe.report.outputs import write_json
    from alignprobe.safe_paths import write_text_atomic

    if workers and scheduler:
        raise BadInput("give --workers or --scheduler, not both")
    _refuse_bad_paths(paths, json_path, report_dir, junit_path)
    policy = AuditPolicy().updated(parse_overrides(overrides)) if overrides else AuditPolicy()
    journal = _journal_path(json_path, report_dir)
    result = run_audit(list(paths), policy=policy, workers=workers, scheduler=scheduler, journal=journal,
                       progress=not no_progress)
    if json_path:
        write_json(json_path, result.to_json())
        forget_json_path()
    if junit_path:
        write_text_atomic(junit_path, render_junit(result, strict), "audit report")
    echo = people_echo(json_path)
    echo(format_summary(result))
    if report_dir is not None:
        echo(f"report: {write_audit_report(result, report_dir, strict).html}")
    return EXIT_PASS if result.passed(strict=strict) else EXIT_FAIL


def _journal_path(json_path, report_dir) -> str | None:
    if report_dir is not None:
        return os.path.join(report_dir, JOURNAL_NAME)
    return json_path + ".journal" if json_path and json_path != "-" else None


def _refuse_bad_paths(paths, json_path, report_dir, junit_path) -> None:
    """An output (the report's files, its resume journal) over or inside an audited path: one line,
    before anything is read or written (safe_paths)."""
    from alignprobe.audit.render.writer import REPORT_NAMES
    from alignprobe.safe_paths import output_file, refuse_overlap, refuse_unusable_name

    outputs = {"--json": output_file(json_path, "--json") if json_path not in (None, "-") else None,
               "--junit": output_file(junit_path, "--junit") if junit_path is not None else None}
    if report_dir is not None:
        refuse_unusable_name(report_dir, "--report")
        outputs.update({f"--report ({name})": os.path.join(report_dir, name) for name in REPORT_NAMES})
    outputs["the resume journal"] = _journal_path(json_path, report_dir)
    refuse_overlap(outputs, {f"audited {path}": path for path in paths})
