"""speculators: a states file whose ``token_ids`` are not its prepare-data row's ``input_ids``.

speculators' trainer pairs ``hs_{i}.safetensors`` with dataset row ``i`` and skips the sample (a
warning per sample, nothing more) when the ids differ: a file of another row, a re-run of
prepare-data after extraction (it shuffles), or states written with padding past the sample.
"""

from __future__ import annotations

from alignprobe.audit.checks.base import Scanned, add_example, merge_examples
from alignprobe.audit.policy import AuditPolicy
from alignprobe.findings import Finding, make


class DatasetTokens:
    name = "dataset_tokens"

    def empty(self) -> dict:
        return {"samples": 0, "padded": 0, "examples": []}

    def scan(self, partial: dict, scanned: Scanned) -> None:
        mismatch = scanned.sample.dataset_mismatch
        if mismatch is None:
            return
        partial["samples"] += 1
        padded = bool(scanned.sample.padding)
        partial["padded"] += padded
        add_example(partial["examples"], {"sample": scanned.sample.name, "dataset_tokens": mismatch[0],
                                          "file_tokens": mismatch[1], "padded": padded})

    def merge(self, into: dict, other: dict) -> None:
        into["samples"] += other["samples"]
        into["padded"] += other["padded"]
        merge_examples(into["examples"], other["examples"])

    def findings(self, merged: dict, policy: AuditPolicy) -> list[Finding]:
        if not merged["samples"]:
            return []
        return [make(
            "tokens_differ_from_dataset",
            f"{merged['samples']} states file(s) hold token ids other than their prepare-data row's input_ids "
            f"({merged['padded']} of them the row's ids plus padding): speculators' trainer skips them",
            dict(merged),
            "re-extract these rows from the dataset they are paired with (never re-run prepare-data after "
            "extraction: it shuffles), and write each sample's rows without padding", policy=policy,
        )]
