"""Padding rows that carry states: SpecForge runs a padded batch whole, so the pad tail of a short
sample holds states of pad tokens. A trainer that reads the rows without the loss mask (or a mask
that is off by one) learns from them."""

from __future__ import annotations

from alignprobe.audit.checks.base import Scanned, add_example, merge_examples
from alignprobe.audit.policy import AuditPolicy
from alignprobe.findings import Finding, make


class PaddingStates:
    name = "padding_states"

    def empty(self) -> dict:
        return {"samples": 0, "rows": 0, "padded_samples": 0, "padding_rows": 0, "examples": []}

    def scan(self, partial: dict, scanned: Scanned) -> None:
        pad = scanned.sample.padding
        if not pad:
            return
        partial["padded_samples"] += 1
        partial["padding_rows"] += pad
        start = len(scanned.sample.token_ids) - pad
        carrying = 0
        for facts in scanned.facts.values():
            tail = ~facts.zero[start:] & facts.finite[start:]
            carrying = max(carrying, int(tail.any(axis=1).sum()))
        if carrying:
            partial["samples"] += 1
            partial["rows"] += carrying
            add_example(partial["examples"], {"sample": scanned.sample.name, "padding_rows": pad,
                                              "rows_with_states": carrying, "first_padding_position": start})

    def merge(self, into: dict, other: dict) -> None:
        for key in ("samples", "rows", "padded_samples", "padding_rows"):
            into[key] += other[key]
        merge_examples(into["examples"], other["examples"])

    def findings(self, merged: dict, policy: AuditPolicy) -> list[Finding]:
        if not merged["samples"]:
            return []
        return [make(
            "padding_states",
            f"{merged['rows']} padding row(s) in {merged['samples']} sample(s) carry hidden states",
            {k: merged[k] for k in ("samples", "rows", "padded_samples", "padding_rows", "examples")},
            "make sure the trainer masks these rows (loss_mask 0 and, for the drafter's inputs, the "
            "attention mask) or strip the padding when the states are written (alignprobe import drops it)", policy=policy,
        )]
