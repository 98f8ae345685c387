"""``audit(paths)``: plan the units, run them (here or on Dask), journal each, merge, judge."""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Sequence

from alignprobe.audit.checks import all_checks
from alignprobe.audit.checks.loss_mask import notes as loss_mask_notes
from alignprobe.audit.checks.norm_outliers import robust_spread
from alignprobe.audit.cluster import run_units
from alignprobe.audit.journal import Journal
from alignprobe.audit.policy import AuditPolicy
from alignprobe.audit.result import AuditResult, AuditSource, SampleFlag, SliceAudit, verdict_of
from alignprobe.audit.scan import InOrderMerge
from alignprobe.audit.units import plan_units
from alignprobe.compare.result import SEVERITY_RANK
from alignprobe.errors import BadInput


def audit(
    paths: str | os.PathLike | Sequence[str | os.PathLike],
    *,
    policy: AuditPolicy | None = None,
    workers: int | None = None,
    scheduler: str | None = None,
    journal: str | os.PathLike | None = None,
    progress: bool = False,
    threads: int | None = None,
    torch_threads: int = 1,
) -> AuditResult:
    """Audit one or more training sets (alignprobe dumps, SpecForge, speculators, EAGLE ge_data folders).

    ``workers=N`` runs a local Dask cluster of N processes, ``scheduler="tcp://host:8786"`` an existing
    one (the files must be at the same paths on its workers); without either, ``threads`` units are
    scanned at once in this process (default up to 4). With ``journal`` a killed audit resumes from
    the units it finished. ``torch_threads`` (in this process only) is how many threads each scan's
    reductions use: 1 by default (see scan.py); more for a one-process audit of an idle many-core host.
    """
    started = time.perf_counter()
    policy = policy or AuditPolicy()
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    if not paths:
        raise BadInput("give at least one dataset path to audit")
    units, sources = [], []
    for path in paths:
        planned = plan_units(os.fspath(path))
        units += planned
        sources.append(AuditSource(os.path.abspath(os.fspath(path)), planned[0].format,
                                   sum(len(u.files) for u in planned) if planned[0].format != "dump" else 1, len(planned)))
    keys = [u.key for u in units]
    if len(set(keys)) != len(keys):
        raise BadInput("a dataset path is given twice: give each once")
    book = Journal(journal)
    merger = InOrderMerge()  # unit order, whatever order the units finish in
    todo, resumed = [], 0
    for i, key in enumerate(keys):
        if key in book.done:
            merger.add(i, book.done.pop(key))
            resumed += 1
        else:
            todo.append(i)
    bar = _bar(len(units), resumed, progress)
    try:
        for j, part in run_units([units[i] for i in todo], workers=workers, scheduler=scheduler, threads=threads,
                                 torch_threads=torch_threads):
            book.record(keys[todo[j]], part)
            merger.add(todo[j], part)
            bar.update(1)
    finally:
        bar.close()
        book.close()
    merged = merger.merged
    result = judge(merged, sources, policy, workers or 0, resumed)
    result.notes += loss_mask_notes(merged["checks"]["loss_mask"])
    result.elapsed_s = time.perf_counter() - started
    if resumed:
        result.notes.append(f"resumed: {resumed} of {len(units)} units came from the journal {book.path}")
    book.finish()
    return result


def judge(merged: dict, sources: list[AuditSource], policy: AuditPolicy, workers: int, resumed: int) -> AuditResult:
    findings = []
    for check in all_checks():
        findings += check.findings(merged["checks"][check.name], policy)
    findings.sort(key=lambda f: -SEVERITY_RANK[f.severity])
    return AuditResult(
        verdict=verdict_of(findings), findings=findings, sources=sources, slices=_slices(merged["checks"]),
        samples_flagged=_flags(findings), samples=merged["samples"], tokens=merged["tokens"], bytes=merged["bytes"],
        workers=workers, resumed_units=resumed, policy=dataclasses.asdict(policy),
    )


def _slices(checks: dict) -> list[SliceAudit]:
    out = []
    nonfinite = checks["nonfinite"]["slices"]
    hist = checks["norm_outliers"]["hist"]
    for key, (rows, zero, constant) in sorted(checks["degenerate"]["slices"].items()):
        nan, inf = nonfinite.get(key, [0, 0])
        row = SliceAudit(key, rows, nan, inf, zero, constant)
        if key in hist:
            median, sigma, _ = robust_spread(hist[key])
            row.norm_median, row.norm_robust_sigma_log2 = 2 ** median, sigma
        out.append(row)
    return out


def _flags(findings) -> list[SampleFlag]:
    by_sample: dict[str, list[str]] = {}
    for f in findings:
        for example in f.evidence.get("examples", []):
            names = [example["sample"]] if "sample" in example else example.get("samples", [])
            for name in names:
                codes = by_sample.setdefault(name, [])
                if f.code not in codes:
                    codes.append(f.code)
    return [SampleFlag(name, codes) for name, codes in sorted(by_sample.items())]


def _bar(total: int, done: int, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=done, desc="audit", unit="unit", disable=not enabled)
