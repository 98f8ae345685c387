"""A layer slot that repeats its neighbour: two ids mapped onto one layer, or a capture that stored one
tensor twice. Every real row of the sample is compared exactly (the equal sums of squares say where
to look, the values decide)."""

from __future__ import annotations

import torch

from alignprobe.audit.checks.base import Scanned, add_counts, add_example, merge_examples, slices_subject
from alignprobe.audit.policy import AuditPolicy
from alignprobe.findings import Finding, make


PAIRED = " = "  # a pair of slices, as the evidence names it: "<slice> = <its neighbour>"


class RepeatedTaps:
    name = "repeated_taps"

    def empty(self) -> dict:
        return {"pairs": {}, "examples": []}

    def scan(self, partial: dict, scanned: Scanned) -> None:
        for stream, facts in scanned.facts.items():
            states = scanned.sample.states[stream]
            real = scanned.real_rows(stream)
            keys = scanned.slice_keys(stream)
            for j in range(states.shape[1] - 1):
                n2 = facts.norm2[:real]
                live = facts.finite[:real, j] & ~facts.zero[:real, j]
                same = live & (n2[:, j] == n2[:, j + 1])
                if not live.any() or not same[live].all():
                    continue
                rows = torch.from_numpy(same)
                if torch.equal(states[:real][rows, j], states[:real][rows, j + 1]):
                    pair = keys[j] + PAIRED + keys[j + 1]
                    add_counts(partial["pairs"], {pair: 1})
                    add_example(partial["examples"], {"sample": scanned.sample.name, "slices": pair})

    def merge(self, into: dict, other: dict) -> None:
        add_counts(into["pairs"], other["pairs"])
        merge_examples(into["examples"], other["examples"])

    def findings(self, merged: dict, policy: AuditPolicy) -> list[Finding]:
        if not merged["pairs"]:
            return []
        pairs = dict(sorted(merged["pairs"].items()))
        return [make(
            "repeated_tap",
            f"a slot equals its neighbour exactly: {', '.join(f'{p} ({n} samples)' for p, n in pairs.items())}",
            {"pairs": pairs, "examples": merged["examples"]},
            "two layer ids landed on one layer (duplicated or clamped ids, an engine that de-duplicates "
            "differently): check the extraction run's layer ids; the drafter's fc was trained on a "
            "repeated state", policy=policy,
            subject=slices_subject(dict.fromkeys(key for pair in pairs for key in pair.split(PAIRED))),
        )]
