"""Samples with the same token ids: a dataset that repeats prompts weighs them twice and leaks between
train and held-out splits. Samples are keyed by a 128-bit hash of their token ids."""

from __future__ import annotations

import hashlib

from alignprobe.audit.checks.base import MAX_EXAMPLES, Scanned
from alignprobe.audit.policy import AuditPolicy
from alignprobe.findings import Finding, make


class Duplicates:
    name = "duplicates"

    def empty(self) -> dict:
        return {"by_hash": {}}  # hash -> [count, first names...] (up to 3 names)

    def scan(self, partial: dict, scanned: Scanned) -> None:
        digest = hashlib.blake2b(scanned.sample.token_ids.tobytes(), digest_size=16).hexdigest()
        _add(partial["by_hash"], digest, [1, scanned.sample.name])

    def merge(self, into: dict, other: dict) -> None:
        for digest, entry in other["by_hash"].items():
            _add(into["by_hash"], digest, entry)

    def findings(self, merged: dict, policy: AuditPolicy) -> list[Finding]:
        groups = [entry for entry in merged["by_hash"].values() if entry[0] > 1]
        if not groups:
            return []
        extra = sum(g[0] - 1 for g in groups)
        groups.sort(key=lambda g: (-g[0], g[1]))
        return [make(
            "duplicate_samples",
            f"{extra} sample(s) repeat the token ids of another ({len(groups)} group(s))",
            {"groups": len(groups), "extra_samples": extra,
             "examples": [{"count": g[0], "samples": g[1:]} for g in groups[:MAX_EXAMPLES]]},
            "de-duplicate the prompts before extraction (or drop the repeats): repeats weigh those "
            "prompts twice and leak between training and evaluation splits", policy=policy,
        )]


def _add(table: dict, digest: str, entry: list) -> None:
    mine = table.get(digest)
    if mine is None:
        table[digest] = list(entry[:4])
        return
    mine[0] += entry[0]
    mine.extend(entry[1 : 1 + max(0, 4 - len(mine))])
