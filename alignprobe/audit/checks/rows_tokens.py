"""States whose row count is not the sample's token count: the rows of another sample, a truncated
write, or prompt tokens only where the ids hold the whole conversation."""

from __future__ import annotations

from alignprobe.audit.checks.base import Scanned, add_example, merge_examples
from alignprobe.audit.policy import AuditPolicy
from alignprobe.findings import Finding, make


class RowsTokens:
    name = "rows_tokens"

    def empty(self) -> dict:
        return {"samples": 0, "examples": [], "empty": 0, "empty_examples": []}

    def scan(self, partial: dict, scanned: Scanned) -> None:
        tokens = len(scanned.sample.token_ids)
        if not tokens:
            partial["empty"] += 1
            add_example(partial["empty_examples"], {"sample": scanned.sample.name})
        rows = {stream: int(s.shape[0]) for stream, s in scanned.sample.states.items()}
        if any(r != scanned.sample.expected_rows for r in rows.values()):  # a short sample: short_rows says so
            partial["samples"] += 1
            add_example(partial["examples"], {"sample": scanned.sample.name, "tokens": tokens, "rows": rows})

    def merge(self, into: dict, other: dict) -> None:
        into["samples"] += other["samples"]
        into["empty"] += other["empty"]
        merge_examples(into["examples"], other["examples"])
        merge_examples(into["empty_examples"], other["empty_examples"])

    def findings(self, merged: dict, policy: AuditPolicy) -> list[Finding]:
        out = []
        if merged["empty"]:
            out.append(make(
                "empty_sample", f"{merged['empty']} sample(s) hold no tokens at all",
                {"samples": merged["empty"], "examples": merged["empty_examples"]},
                "drop them, or find why the extraction wrote an empty file (a prompt that tokenized to nothing, "
                "a request that failed)", policy=policy,
            ))
        if not merged["samples"]:
            return out
        return out + [make(
            "rows_tokens_mismatch",
            f"{merged['samples']} sample(s) hold a different number of state rows than token ids",
            {"samples": merged["samples"], "examples": merged["examples"]},
            "each token needs exactly one state row: re-extract these samples (a truncated write, states "
            "of the prompt only, or rows that belong to another sample)", policy=policy,
        )]
