"""A finding: one named disagreement, as data.

A finding is frozen. Its owner (the module of its failure class) writes its ``title`` and ``fix``
once, about its own evidence, when it makes it; nothing reads or edits that text afterwards. What
other classes have to say about it travels as :class:`Note` records (a code and parameters, with
the sentence the note adds), and :mod:`alignprobe.findings.render` puts the text together once, at
output. Decisions are made on ``code``, ``severity``, ``subject``, ``evidence`` and note codes only.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from alignprobe.findings.severity import SEVERITIES, Severity


@dataclasses.dataclass(frozen=True)
class Subject:
    """What a finding is about: a serve stream (``""``: the whole comparison or dataset) and, where
    it concerns some of its slices only, their labels (``HF[30]``)."""

    stream: str = ""
    slices: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Note:
    """What another failure class adds to a finding: ``code`` names the note (decisions test it),
    ``params`` are its numbers; ``headline`` is appended to the title, ``fix_before`` / ``fix_after``
    go around the fix, all at output."""

    code: str
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    headline: str = ""
    fix_before: str = ""
    fix_after: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "params": dict(self.params), "headline": self.headline,
                "fix_before": self.fix_before, "fix_after": self.fix_after}


@dataclasses.dataclass(frozen=True)
class Finding:
    code: str
    severity: Severity
    title: str
    evidence: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    fix: str = ""
    subject: Subject = Subject()
    notes: tuple[Note, ...] = ()

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity {self.severity!r} is not one of {SEVERITIES}")
        if not isinstance(self.subject, Subject):  # the old record's sixth field was the stream name
            raise TypeError(f"subject must be a Subject, not {type(self.subject).__name__}")

    @property
    def stream(self) -> str:
        return self.subject.stream

    def has_note(self, code: str) -> bool:
        return any(n.code == code for n in self.notes)

    def with_note(self, note: Note) -> "Finding":
        """This finding with ``note`` added (once: a note of the same code is not added twice)."""
        return self if self.has_note(note.code) else dataclasses.replace(self, notes=self.notes + (note,))

