"""Files that could not be read at all (damaged, truncated, other keys): counted, named, skipped."""

from __future__ import annotations

from alignprobe.audit.checks.base import add_example, merge_examples
from alignprobe.audit.policy import AuditPolicy
from alignprobe.findings import Finding, make


class Unreadable:
    """Fed by the runner with each file that failed (not a per-sample check)."""

    name = "unreadable"

    def empty(self) -> dict:
        return {"files": 0, "examples": []}

    def scan(self, partial: dict, scanned) -> None:
        return None

    def failed(self, partial: dict, path: str, reason: str) -> None:
        partial["files"] += 1
        add_example(partial["examples"], {"file": path, "reason": reason})

    def merge(self, into: dict, other: dict) -> None:
        into["files"] += other["files"]
        merge_examples(into["examples"], other["examples"])

    def findings(self, merged: dict, policy: AuditPolicy) -> list[Finding]:
        if not merged["files"]:
            return []
        return [make(
            "unreadable_file", f"{merged['files']} file(s) could not be read",
            dict(merged), "re-extract or remove the named files (the audit read every other file)", policy=policy,
        )]
