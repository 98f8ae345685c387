"""Samples a capture marked short (dump/marks.py): the engine returned rows for only part of the
prompt (a radix-cache hit, chunked prefill). compare's ``short_rows`` code, on the dump alone.

Only the rows returned are read and checked (audit/reading.py); this check says how many were not,
so a dataset whose prefixes were never seen is not mistaken for a whole one.
"""

from __future__ import annotations

from alignprobe.audit.checks.base import Scanned, add_example, merge_examples
from alignprobe.audit.policy import AuditPolicy
from alignprobe.compare.diagnoses.short_rows import cause_and_fix
from alignprobe.findings import Finding, make
from alignprobe.system_flags import system_of


class ShortRows:
    name = "short_rows"

    def empty(self) -> dict:
        return {"samples": 0, "rows_not_returned": 0, "examples": [], "engines": []}

    def scan(self, partial: dict, scanned: Scanned) -> None:
        sample = scanned.sample
        if sample.returned is None:
            return
        start, stop = sample.returned
        partial["samples"] += 1
        partial["rows_not_returned"] += len(sample.token_ids) - (stop - start)
        if sample.engine and sample.engine not in partial["engines"]:
            partial["engines"].append(sample.engine)
        add_example(partial["examples"], {"sample": sample.name, "rows_returned": stop - start,
                                          "tokens": len(sample.token_ids),
                                          "positions_returned": f"{start}-{stop - 1}" if stop > start else "none"})

    def merge(self, into: dict, other: dict) -> None:
        into["samples"] += other["samples"]
        into["rows_not_returned"] += other["rows_not_returned"]
        into["engines"] += [e for e in other["engines"] if e not in into["engines"]]
        merge_examples(into["examples"], other["examples"])

    def findings(self, merged: dict, policy: AuditPolicy) -> list[Finding]:
        if not merged["samples"]:
            return []
        engines = {system_of({"engine": e}) for e in merged["engines"]}
        cause, fix = cause_and_fix(engines.pop() if len(engines) == 1 else "", [])
        return [make(
            "short_rows",
            f"{merged['samples']} sample(s) were captured with fewer rows than tokens; only the rows returned "
            f"were audited, {merged['rows_not_returned']} rows were not seen",
            {"samples": merged["samples"], "rows_not_returned": merged["rows_not_returned"],
             "examples": merged["examples"], "likely_cause": cause},
            fix, policy=policy,
        )]
