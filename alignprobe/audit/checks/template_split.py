"""Token statistics that split the set: a template marker present in only part of it (SpecForge #296:
samples built with another chat template; an empty think block in some responses only).

A marker is a few tokens that always come together: ``<think>`` and ``</think>``, or the header
tokens of the other template. So for every token id the audit keeps how many samples hold it and a
fingerprint of which ones (the sum, modulo 2^64, of a 64-bit hash of each such sample's name:
integers, so partials merge exactly in any order). Two or more tokens with the same count and the
same fingerprint sit in exactly the same samples; when those are a part of the set, neither a
handful nor nearly all, the set is split. Ordinary words that common never share their exact set of
samples; a duplicated sample shares only with its copy (the duplicates check names those).
"""

from __future__ import annotations

import hashlib

import numpy as np

from alignprobe.audit.checks.base import Scanned
from alignprobe.audit.policy import AuditPolicy
from alignprobe.compare.result import Finding

MIN_SAMPLES = 8  # on each side: unrelated tokens seen in only a few samples share those by chance
MAX_GROUPS = 5


class TemplateSplit:
    name = "template_split"

    def empty(self) -> dict:
        # Parallel lists sorted by token id: samples holding the token, and their fingerprint.
        return {"samples": 0, "ids": [], "counts": [], "marks": []}

    def scan(self, partial: dict, scanned: Scanned) -> None:
        tokens = scanned.sample.token_ids[: len(scanned.sample.token_ids) - scanned.sample.padding]
        mark = int.from_bytes(hashlib.blake2b(scanned.sample.name.encode(), digest_size=8).digest(), "little")
        pending = partial.setdefault("_pending", [])  # numpy until finish(): no per-token Python work
        pending.append((np.unique(tokens), mark))
        partial["samples"] += 1

    def finish(self, partial: dict) -> None:
        pending = partial.pop("_pending", [])
        if not pending:
            return
        ids = np.concatenate([u for u, _ in pending])
        marks = np.concatenate([np.full(len(u), m, dtype=np.uint64) for u, m in pending])
        _fold(partial, ids, np.ones(len(ids), dtype=np.int64), marks)

    def merge(self, into: dict, other: dict) -> None:
        into["samples"] += other["samples"]
        _fold(into, np.asarray(other["ids"], dtype=np.int64), np.asarray(other["counts"], dtype=np.int64),
              np.asarray(other["marks"], dtype=np.uint64))

    def findings(self, merged: dict, policy: AuditPolicy) -> list[Finding]:
        total = merged["samples"]
        groups: dict[tuple[int, int], list[int]] = {}
        for token, count, mark in zip(merged["ids"], merged["counts"], merged["marks"]):
            share = count / max(total, 1)
            if (policy.template_split_min_share <= share <= 1 - policy.template_split_min_share
                    and count >= MIN_SAMPLES and total - count >= MIN_SAMPLES):
                groups.setdefault((count, mark), []).append(int(token))
        markers = sorted(((count, sorted(tokens)) for (count, _), tokens in groups.items()
                          if len(tokens) >= policy.template_split_min_run), key=lambda g: (-len(g[1]), -g[0], g[1]))
        out = []
        for count, tokens in markers[:MAX_GROUPS]:
            share = count / total
            out.append(Finding(
                "template_split", "warn",
                f"token ids {tokens[:8]}{' ...' if len(tokens) > 8 else ''} always come together, in {count} of "
                f"{total} samples ({share:.0%}): a template marker in only part of the set",
                {"tokens": tokens, "samples_with": count, "samples": total, "share": share},
                "build every sample with one chat template and one thinking setting (an empty think block in "
                "some samples only, a second template): the drafter is served one of them",
            ))
        return out


def _fold(table: dict, ids: np.ndarray, counts: np.ndarray, marks: np.ndarray) -> None:
    """Add (token, count, fingerprint) triples into the table; uint64 sums wrap: modulo 2^64."""
    ids = np.concatenate([np.asarray(table["ids"], dtype=np.int64), ids])
    counts = np.concatenate([np.asarray(table["counts"], dtype=np.int64), counts])
    marks = np.concatenate([np.asarray(table["marks"], dtype=np.uint64), marks])
    unique, inverse = np.unique(ids, return_inverse=True)
    summed = np.zeros(len(unique), dtype=np.uint64)
    np.add.at(summed, inverse, marks)
    total = np.zeros(len(unique), dtype=np.int64)
    np.add.at(total, inverse, counts)
    table["ids"], table["counts"], table["marks"] = unique.tolist(), total.tolist(), summed.tolist()
