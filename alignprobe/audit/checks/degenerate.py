"""All-zero and constant rows outside the padding: an extractor that wrote nothing (speculators #613,
vLLM PR #46301: a hybrid model's states all zero, and training still "converged")."""

from __future__ import annotations

from alignprobe.audit.checks.base import Scanned, add_counts, add_example, merge_examples, slices_subject
from alignprobe.audit.policy import AuditPolicy
from alignprobe.findings import Finding, make


class Degenerate:
    name = "degenerate"

    def empty(self) -> dict:
        return {"slices": {}, "examples": []}

    def scan(self, partial: dict, scanned: Scanned) -> None:
        for stream, facts in scanned.facts.items():
            real = scanned.real_rows(stream)
            for j, key in enumerate(scanned.slice_keys(stream)):
                zero, constant = int(facts.zero[:real, j].sum()), int(facts.constant[:real, j].sum())
                add_counts(partial["slices"], {key: [real, zero, constant]})
                if zero or constant:
                    add_example(partial["examples"], {"sample": scanned.sample.name, "slice": key,
                                                      "zero_rows": zero, "constant_rows": constant, "rows": real})

    def merge(self, into: dict, other: dict) -> None:
        add_counts(into["slices"], other["slices"])
        merge_examples(into["examples"], other["examples"])

    def findings(self, merged: dict, policy: AuditPolicy) -> list[Finding]:
        bad = {k: {"rows": v[0], "zero_rows": v[1], "constant_rows": v[2], "fraction": (v[1] + v[2]) / max(v[0], 1)}
               for k, v in sorted(merged["slices"].items()) if v[1] or v[2]}
        if not bad:
            return []
        worst = max(v["fraction"] for v in bad.values())
        all_zero = sorted(k for k, v in bad.items() if v["zero_rows"] == v["rows"])
        title = (f"slice(s) {', '.join(all_zero)} are all zero in every sample" if all_zero else
                 f"all-zero or constant rows in {len(bad)} slice(s) (up to {worst:.1%} of rows)")
        return [make(
            "degenerate", title,
            {"slices": bad, "worst_fraction": worst, "all_zero_slices": all_zero, "examples": merged["examples"]},
            "these rows are not hidden states: find why the extractor wrote nothing for them (a hybrid or "
            "unsupported layer, a capture that did not run) and re-extract; padding belongs in the padding, "
            "not in real token rows",
            policy=policy, subject=slices_subject(bad),
            severity="error" if worst > policy.degenerate_fail_fraction else None,
        )]
