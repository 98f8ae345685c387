"""Loss-mask coverage: the share of tokens the drafter is trained on, and samples with none at all
(a template whose assistant marker the masking code did not find)."""

from __future__ import annotations

from alignprobe.audit.checks.base import Scanned, add_example, merge_examples
from alignprobe.audit.policy import AuditPolicy
from alignprobe.findings import Finding, make


class LossMask:
    name = "loss_mask"

    def empty(self) -> dict:
        return {"samples": 0, "tokens": 0, "masked": 0, "unmasked_samples": 0, "without_mask": 0, "examples": [],
                "why_none": {}}  # reason -> samples: the audit's notes say why the mask checks did not run

    def scan(self, partial: dict, scanned: Scanned) -> None:
        mask = scanned.sample.loss_mask
        if mask is None:
            partial["without_mask"] += 1
            if scanned.sample.mask_missing:
                _count_reason(partial["why_none"], scanned.sample.mask_missing, 1)
            return
        real = len(mask) - scanned.sample.padding
        trained = int(mask[:real].sum())
        partial["samples"] += 1
        partial["tokens"] += real
        partial["masked"] += trained
        if not trained:
            partial["unmasked_samples"] += 1
            add_example(partial["examples"], {"sample": scanned.sample.name, "tokens": real})

    def merge(self, into: dict, other: dict) -> None:
        for key in ("samples", "tokens", "masked", "unmasked_samples", "without_mask"):
            into[key] += other[key]
        merge_examples(into["examples"], other["examples"])
        for reason, count in other.get("why_none", {}).items():
            _count_reason(into.setdefault("why_none", {}), reason, count)

    def findings(self, merged: dict, policy: AuditPolicy) -> list[Finding]:
        out = []
        if merged["samples"]:
            coverage = merged["masked"] / max(merged["tokens"], 1)
            out.append(make(
                "loss_mask_coverage",
                f"the loss mask covers {coverage:.1%} of {merged['tokens']} tokens in {merged['samples']} samples",
                {"coverage": coverage, **{k: merged[k] for k in ("samples", "tokens", "masked", "without_mask")}},
                "", policy=policy,
            ))
        if merged["unmasked_samples"]:
            out.append(make(
                "empty_loss_mask",
                f"{merged['unmasked_samples']} sample(s) have no token in the loss mask: they train nothing",
                {"samples": merged["unmasked_samples"], "examples": merged["examples"]},
                "the masking code did not find the assistant turn: check the chat template the data was "
                "built with against the one the masking expects", policy=policy,
            ))
        return out


MAX_REASONS = 8  # distinct reasons kept (one per dataset, usually); the rest are counted under one line


def _count_reason(table: dict, reason: str, count: int) -> None:
    if reason not in table and len(table) >= MAX_REASONS:
        reason = "other samples without a loss mask"
    table[reason] = table.get(reason, 0) + count


def notes(merged: dict) -> list[str]:
    """One line per reason the loss mask was absent, with how many samples it covers."""
    return [f"{reason} ({count} sample(s))" for reason, count in sorted(merged.get("why_none", {}).items())]
