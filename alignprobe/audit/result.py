"""What an audit found: plain records the CLI, the report writers and notebooks read (no report imports).

``AuditResult``
    verdict      "PASS" | "WARN" | "FAIL", from the findings' severities as in compare
    findings     list[Finding] (compare's record: code, severity, title, evidence, fix), most severe first
    sources      list[AuditSource]: each PATH, its layout, files and units
    slices       list[SliceAudit]: per slice of every stream (per HF index for dumps), row counts and norms
    samples_flagged  list[SampleFlag]: the samples the findings name (up to 20 a finding), by sample
    samples / tokens / bytes   read in all; workers (0: in this process), resumed_units (from the journal)
    policy       the thresholds used; elapsed_s; notes
``bool(result)`` is True unless FAIL; ``passed(strict=True)`` only for PASS.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from alignprobe.compare.result import SEVERITY_RANK, Finding


@dataclasses.dataclass
class AuditSource:
    path: str
    format: str
    files: int
    units: int


@dataclasses.dataclass
class SliceAudit:
    key: str  # "<dataset>:<stream>:<slice label>"
    rows: int  # real rows (padding left out)
    nan_rows: int = 0
    inf_rows: int = 0
    zero_rows: int = 0
    constant_rows: int = 0
    norm_median: float = float("nan")  # of rows past position 0
    norm_robust_sigma_log2: float = float("nan")


@dataclasses.dataclass
class SampleFlag:
    sample: str
    codes: list[str]


@dataclasses.dataclass
class AuditResult:
    verdict: str
    findings: list[Finding]
    sources: list[AuditSource]
    slices: list[SliceAudit]
    samples_flagged: list[SampleFlag]
    samples: int
    tokens: int
    bytes: int
    workers: int
    resumed_units: int
    policy: dict[str, Any]
    elapsed_s: float = 0.0
    notes: list[str] = dataclasses.field(default_factory=list)

    def __bool__(self) -> bool:
        return self.verdict != "FAIL"

    def passed(self, strict: bool = False) -> bool:
        return self.verdict == "PASS" if strict else self.verdict != "FAIL"

    def codes(self) -> list[str]:
        return [f.code for f in self.findings]

    def finding(self, code: str) -> Finding | None:
        """The first finding with this code, as CompareResult.finding gives it."""
        return next((f for f in self.findings if f.code == code), None)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(_finite(self.to_dict()), indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "AuditResult":
        raw = json.loads(text)
        raw["findings"] = [Finding(**f) for f in raw["findings"]]
        raw["sources"] = [AuditSource(**s) for s in raw["sources"]]
        raw["slices"] = [SliceAudit(**{k: (float(v) if v in ("nan", "inf", "-inf") else v) for k, v in s.items()})
                         for s in raw["slices"]]
        raw["samples_flagged"] = [SampleFlag(**s) for s in raw["samples_flagged"]]
        return cls(**raw)


def verdict_of(findings: list[Finding]) -> str:
    worst = max((SEVERITY_RANK[f.severity] for f in findings), default=0)
    return ("PASS", "WARN", "FAIL")[worst]


def _finite(value):
    if isinstance(value, float) and value != value or value in (float("inf"), float("-inf")):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value
