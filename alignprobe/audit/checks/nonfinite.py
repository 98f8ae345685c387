"""NaN and Inf rows: one bad batch, an fp16 overflow. compare's ``nonfinite`` code, on the data alone."""

from __future__ import annotations

from alignprobe.audit.checks.base import Scanned, add_counts, add_example, merge_examples, slices_subject
from alignprobe.audit.policy import AuditPolicy
from alignprobe.findings import Finding, make


class NonFinite:
    name = "nonfinite"

    def empty(self) -> dict:
        return {"slices": {}, "samples": 0, "examples": []}

    def scan(self, partial: dict, scanned: Scanned) -> None:
        hit = False
        for stream, facts in scanned.facts.items():
            for j, key in enumerate(scanned.slice_keys(stream)):
                nan, inf = int(facts.nan[:, j].sum()), int(facts.inf[:, j].sum())
                if nan or inf:
                    add_counts(partial["slices"], {key: [nan, inf]})
                    if not hit:
                        first = int((facts.nan[:, j] | facts.inf[:, j]).argmax())
                        add_example(partial["examples"], {"sample": scanned.sample.name, "slice": key, "position": first,
                                                          "nan_rows": nan, "inf_rows": inf})
                    hit = True
        partial["samples"] += hit

    def merge(self, into: dict, other: dict) -> None:
        add_counts(into["slices"], other["slices"])
        into["samples"] += other["samples"]
        merge_examples(into["examples"], other["examples"])

    def findings(self, merged: dict, policy: AuditPolicy) -> list[Finding]:
        if not merged["samples"]:
            return []
        slices = {k: {"nan_rows": v[0], "inf_rows": v[1]} for k, v in sorted(merged["slices"].items())}
        rows = sum(v[0] + v[1] for v in merged["slices"].values())
        return [make(
            "nonfinite",
            f"{rows} NaN/Inf rows in {merged['samples']} sample(s), in {len(slices)} slice(s)",
            {"samples": merged["samples"], "slices": slices, "examples": merged["examples"]},
            "a drafter trained on these rows learns from garbage: drop the samples, or re-extract them "
            "(fp16 overflow: extract in bf16; one bad batch: rerun it)", policy=policy, subject=slices_subject(slices),
        )]
