"""What every audit check is: one idea, scanned sample by sample into a partial that merges exactly.

A partial is plain JSON (ints, strings, lists, dicts), so it can travel between Dask workers and sit
in the resume journal. ``merge`` is applied in unit order, so anything order-dependent in it (the
first examples kept) is the same whatever the number of workers; counts are integers, so sums are
exact. A check never keeps per-row data: its partial is bounded whatever the dataset's size.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

from alignprobe.audit.policy import AuditPolicy
from alignprobe.audit.rows import RowFacts
from alignprobe.audit.sample import AuditSample
from alignprobe.findings import Finding, Subject

MAX_EXAMPLES = 20  # samples named per finding; the counts cover all of them


@dataclasses.dataclass
class Scanned:
    """A sample and its row facts per stream, as every check receives it."""

    sample: AuditSample
    facts: dict[str, RowFacts]

    def slice_keys(self, stream: str) -> list[str]:
        return [slice_key(self.sample.source, stream, label) for label in self.sample.labels[stream]]

    def real_rows(self, stream: str) -> int:
        """Rows that are neither padding nor beyond the token ids."""
        rows = self.sample.states[stream].shape[0]
        return max(0, min(rows, len(self.sample.token_ids) - self.sample.padding))


def slice_key(source: str, stream: str, label: str) -> str:
    import os

    return f"{os.path.basename(os.path.normpath(source))}:{stream}:{label}"


def slices_subject(keys) -> Subject:
    """What a finding about these slices (``slice_key``s) is about: the slices, and their stream where
    they all belong to one."""
    keys = tuple(keys)
    streams = {key.split(":")[-2] for key in keys}
    return Subject(streams.pop() if len(streams) == 1 else "", keys)


class Check(Protocol):
    name: str

    def empty(self) -> dict: ...

    def scan(self, partial: dict, scanned: Scanned) -> None: ...

    def merge(self, into: dict, other: dict) -> None: ...

    # Optional: ``finish(partial)`` at the end of a unit, for a check that keeps numpy work pending.

    def findings(self, merged: dict, policy: AuditPolicy) -> list[Finding]: ...


def add_example(examples: list, item) -> None:
    if len(examples) < MAX_EXAMPLES:
        examples.append(item)


def merge_examples(into: list, other: list) -> None:
    into.extend(other[: MAX_EXAMPLES - len(into)])


def add_counts(into: dict, other: dict) -> None:
    """Per-key integer counts (or per-key lists of integer counts) summed in place."""
    for key, value in other.items():
        if isinstance(value, list):
            mine = into.setdefault(key, [0] * len(value))
            for i, v in enumerate(value):
                mine[i] += v
        else:
            into[key] = into.get(key, 0) + value
