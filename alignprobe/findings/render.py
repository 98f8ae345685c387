"""A finding's text, put together once, at output: its owner's title and fix with its notes.

Every renderer (terminal, HTML, Markdown, JUnit, GitHub annotations, result.json) calls these; none
builds a finding's text itself.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from alignprobe.findings.jsonable import jsonable
from alignprobe.findings.record import Finding, Note, Subject


def title(finding: Finding) -> str:
    return finding.title + "".join(n.headline for n in _notes(finding))


def fix(finding: Finding) -> str:
    notes = _notes(finding)
    return "".join(n.fix_before for n in notes) + finding.fix + "".join(n.fix_after for n in notes)


def where(finding: Finding) -> str:
    """``[stream] `` before a finding about one stream, else nothing."""
    return f"[{finding.stream}] " if finding.stream else ""


def to_dict(finding: Finding) -> dict[str, Any]:
    """A finding as result.json holds it: ``title`` and ``fix`` rendered (what a user reads), the notes
    as data, and the owner's own text under ``own`` where notes changed it."""
    notes = _notes(finding)
    subject = getattr(finding, "subject", Subject(finding.stream))
    out = {"code": finding.code, "severity": finding.severity, "title": title(finding),
           "evidence": jsonable(finding.evidence), "fix": fix(finding), "stream": finding.stream,
           "slices": list(subject.slices), "notes": jsonable([n.to_dict() for n in notes])}
    if notes:
        out["own"] = {"title": finding.title, "fix": finding.fix}
    return out


def record_dict(record: Any) -> dict[str, Any]:
    """A result record (a dataclass whose ``findings`` are findings) as its JSON object: findings as
    :func:`to_dict` writes them, everything else as findings/jsonable.py does."""
    return {f.name: [to_dict(x) for x in record.findings] if f.name == "findings" else jsonable(getattr(record, f.name))
            for f in dataclasses.fields(record)}


def from_dict(raw: dict[str, Any]) -> Finding:
    """The finding :func:`to_dict` wrote (and the older form: no notes, slices or own text)."""
    own = raw.get("own") or {}
    notes = tuple(Note(n["code"], dict(n.get("params") or {}), n.get("headline", ""), n.get("fix_before", ""),
                       n.get("fix_after", "")) for n in raw.get("notes") or ())
    return Finding(code=raw["code"], severity=raw["severity"], title=own.get("title", raw.get("title", "")),
                   evidence=dict(raw.get("evidence") or {}), fix=own.get("fix", raw.get("fix", "")),
                   subject=Subject(raw.get("stream", "") or "", tuple(raw.get("slices") or ())), notes=notes)


def _notes(finding: Finding) -> tuple[Note, ...]:
    # A record of the finding shape without notes or a subject (a judge's own mutable finding, before
    # it makes findings.Finding records) renders as its owner's text alone.
    return getattr(finding, "notes", ())


VERDICT_ICONS = {"PASS": "✅", "WARN": "⚠️", "FAIL": "❌"}  # before the verdict in a CI comment's heading


def markdown_cell(text: str) -> str:
    """``text`` safe inside a Markdown table cell or list item of a CI comment."""
    # GitHub renders HTML inside a comment: a title quoting a tag must not become one. Only "<" opens
    # a tag, so ">" stays as typed ("rel-RMS >= 0.07" reads as written, in the raw file too); "<="
    # and ">=" become their signs so no "<" is left to escape in a comparison.
    text = str(text).replace("<=", "≤").replace(">=", "≥")
    return text.replace("|", "\\|").replace("\n", " ").replace("<", "&lt;")
