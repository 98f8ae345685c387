"""The one step that settles how findings bear on each other, on structured fields only.

A failure class declares its relations as data next to its rule: which findings of the same
subject its own replaces (:class:`Supersedes`: the explanation that names a layer offset replaces
the numeric drift that offset caused) and which it annotates (:class:`Annotates`: a token shift
tells every drift finding that its states were computed on another context). :func:`resolve` applies
them all once, after every judge has spoken, then orders the findings most severe first.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Iterable, Sequence

from alignprobe.findings.record import Finding, Note
from alignprobe.findings.severity import SEVERITY_RANK


@dataclasses.dataclass(frozen=True)
class Supersedes:
    """A finding of code ``by`` replaces the findings of ``codes`` on its own stream (``streams="same"``),
    on the other streams only (``"other"``: a cause found on one stream that voids what the others
    measured) or on every stream (``"any"``). Where ``keep_evidence``, the replaced ones' evidence joins
    it (its own keys win): the measurement a cause explains stays at hand."""

    by: str
    codes: tuple[str, ...]
    streams: str = "same"
    keep_evidence: bool = False
    when: Callable[[Finding], bool] = lambda finding: True  # only findings of ``by`` that pass this


@dataclasses.dataclass(frozen=True)
class Annotates:
    """A finding of code ``by`` adds ``note(it)`` to every finding of ``codes`` (on its own stream
    only with ``same_stream``)."""

    by: str
    codes: tuple[str, ...]
    note: Callable[[Finding], Note]
    same_stream: bool = False
    when: Callable[[Finding], bool] = lambda finding: True


Rule = Supersedes | Annotates


def _bears(rule: Rule, by: Finding, other: Finding) -> bool:
    streams = rule.streams if isinstance(rule, Supersedes) else "same" if rule.same_stream else "any"
    on = {"same": other.stream == by.stream, "other": other.stream != by.stream, "any": True}[streams]
    return other is not by and other.code in rule.codes and on


def resolve(findings: Iterable[Finding], rules: Sequence[Rule]) -> list[Finding]:
    """``findings`` with every rule applied: superseded ones dropped (their evidence kept where the
    rule says), notes attached, most severe first (the order of discovery otherwise)."""
    out = list(findings)
    for rule in (r for r in rules if isinstance(r, Supersedes)):
        for by in [f for f in out if f.code == rule.by and rule.when(f)]:
            replaced = [f for f in out if _bears(rule, by, f)]
            if not replaced:
                continue
            kept = by
            if rule.keep_evidence:
                merged: dict = {}
                for f in replaced:
                    merged.update(f.evidence)
                kept = dataclasses.replace(by, evidence={**merged, **by.evidence})
            out = [kept if f is by else f for f in out if not any(f is r for r in replaced)]
    for annotation in (r for r in rules if isinstance(r, Annotates)):
        for by in [f for f in out if f.code == annotation.by and annotation.when(f)]:
            out = [f.with_note(annotation.note(by)) if _bears(annotation, by, f) else f for f in out]
    return sort_findings(out)


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Most severe first; the order of discovery otherwise."""
    return sorted(findings, key=lambda f: -SEVERITY_RANK[f.severity])
