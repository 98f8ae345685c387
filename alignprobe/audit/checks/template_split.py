"""Token statistics that split the set: a template marker present in only part of it (SpecForge #296:
samples built with another chat template; an empty think block in some responses only).

A marker is a few tokens that always come together: ``<think>`` and ``</think>``, or the header
tokens of the other template. So for every token id the audit keeps how many samples hold it and a
fingerprint of which ones (the sum, modulo 2^64, of a 64-bit hash of each such sample's name:
integers, so partials merge exactly in any order). Two or more tokens with the same count and the
same fingerprint sit in exactly the same samples; when those are a part of the set, neither a
handful nor nearly all, the set is split. Ordinary words that common never share their exact set of
samples; a duplicated sample shares only with its copy (the duplicates check names those).

The finding names the smaller side: for every token the first ``NAMED`` samples (in file order)
that hold it, or the first ``NAMED`` that lack it. Partials merge in file order, so the names are the
same on any number of workers and units.
"""

from __future__ import annotations

import hashlib

import numpy as np

from alignprobe.audit.checks.base import Scanned
from alignprobe.audit.policy import AuditPolicy
from alignprobe.findings import Finding, make

MIN_SAMPLES = 8  # on each side: unrelated tokens seen in only a few samples share those by chance
MAX_GROUPS = 5
NAMED = 8  # samples named a side of a marker: enough to open and read, a bounded partial


class TemplateSplit:
    name = "template_split"

    def empty(self) -> dict:
        # Parallel lists sorted by token id: samples holding the token, and their fingerprint; per
        # token (str keys: JSON) the first samples holding it and the first lacking it; "head": the
        # first samples of all; "open": tokens whose list of samples lacking it is not full yet.
        return {"samples": 0, "ids": [], "counts": [], "marks": [], "with": {}, "without": {}, "head": [],
                "open": {}}

    def scan(self, partial: dict, scanned: Scanned) -> None:
        tokens = scanned.sample.token_ids[: len(scanned.sample.token_ids) - scanned.sample.padding]
        pending = partial.setdefault("_pending", [])  # numpy until finish(): no per-token Python work
        pending.append((np.unique(tokens), scanned.sample.name))

    def finish(self, partial: dict) -> None:
        pending = partial.pop("_pending", [])
        if pending:
            partial.clear()
            partial.update(_unit_partial(pending))

    def merge(self, into: dict, other: dict) -> None:
        """``other`` is one unit's partial (as finish() leaves it), merged after every earlier unit."""
        seen = set(into["ids"])
        for token, names in other["with"].items():
            mine = into["with"].setdefault(token, [])
            mine.extend(names[: NAMED - len(mine)])
        for token in list(into["open"]):
            mine = into["without"][token]
            mine.extend(_lacking(other, token)[: NAMED - len(mine)])
            if len(mine) >= NAMED:
                del into["open"][token]
        for token in other["with"]:
            if int(token) not in seen:  # every sample before this unit lacks it
                mine = into["without"][token] = list(into["head"][:NAMED])
                mine.extend(_lacking(other, token)[: NAMED - len(mine)])
                if len(mine) < NAMED:
                    into["open"][token] = True
        into["head"].extend(other["head"][: 2 * NAMED - len(into["head"])])
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
            holding = count <= total - count  # the smaller side: the samples that hold the marker
            # All the marker's tokens sit in the same samples, so any one token's list names them.
            named = list(merged["with" if holding else "without"].get(str(tokens[0]), []))
            out.append(make(
                "template_split",
                f"token ids {tokens[:8]}{' ...' if len(tokens) > 8 else ''} always come together, in {count} of "
                f"{total} samples ({share:.0%}): a template marker in only part of the set; "
                f"{min(count, total - count)} samples {'hold' if holding else 'lack'} it, e.g. {', '.join(named[:3])}",
                {"tokens": tokens, "samples_with": count, "samples": total, "share": share,
                 "minority": "with" if holding else "without", "minority_samples": min(count, total - count),
                 "examples": [{"sample": name, "marker": "present" if holding else "absent"} for name in named]},
                "build every sample with one chat template and one thinking setting (an empty think block in "
                "some samples only, a second template): the drafter is served one of them; the named samples "
                "are the smaller side", policy=policy,
            ))
        return out


def _lacking(unit: dict, token: str) -> list[str]:
    """The first samples of a unit partial that lack ``token``: listed where the unit had to, else its
    head without the token's holders (the unit lists it wherever that would be wrong)."""
    if token in unit["without"]:
        return unit["without"][token]
    held = set(unit["with"].get(token, ()))
    return [name for name in unit["head"] if name not in held][:NAMED]


def _unit_partial(pending: list) -> dict:
    """One unit's samples (unique tokens, name) as a partial: counts, fingerprints and named sides.

    The samples lacking a token are its head (the first 2 * NAMED samples) less the token's first
    NAMED holders, exactly, unless more than NAMED of the head hold it: only those tokens (at most
    2 x the unique tokens of a sample) get a list of their own, so the partial stays small."""
    names = [name for _, name in pending]
    n = len(names)
    ids = np.concatenate([u for u, _ in pending])
    where = np.concatenate([np.full(len(u), p, dtype=np.int64) for p, (u, _) in enumerate(pending)])
    marks = np.array([_mark(name) for name in names], dtype=np.uint64)[where]
    order = np.lexsort((where, ids))
    ids, where, marks = ids[order], where[order], marks[order]
    tokens, starts, counts = np.unique(ids, return_index=True, return_counts=True)
    rank = np.arange(len(ids)) - np.repeat(starts, counts)  # a holder's place among the token's holders
    kept = np.split(where[rank < NAMED], np.cumsum(np.minimum(counts, NAMED))[:-1])
    holding = {str(t): [names[p] for p in held.tolist()] for t, held in zip(tokens.tolist(), kept)}
    early = np.add.reduceat((where < 2 * NAMED).astype(np.int64), starts) if len(ids) else np.zeros(0, np.int64)
    lacking = {}
    for i in np.flatnonzero(early > NAMED).tolist():
        free = np.ones(n, dtype=bool)
        free[where[starts[i] : starts[i] + counts[i]]] = False
        lacking[str(int(tokens[i]))] = [names[p] for p in np.flatnonzero(free)[:NAMED].tolist()]
    part = {"samples": n, "ids": [], "counts": [], "marks": [], "with": holding, "without": lacking,
            "head": names[: 2 * NAMED], "open": {}}
    _fold(part, ids, np.ones(len(ids), dtype=np.int64), marks)
    return part


def _mark(name: str) -> int:
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "little")


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
