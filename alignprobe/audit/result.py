"""What an audit found: plain records the CLI, the report writers and notebooks read (no report imports).

``AuditResult``
    verdict      "PASS" | "WARN" | "FAIL", the worst of the findings' severities (findings/severity.py)
    findings     list[Finding] (findings/record.py: code, severity, subject, evidence, title, fix), most severe first
    sources      list[AuditSource]: each PATH, its layout, files and units
    slices       list[SliceAudit]: per slice of every stream (per HF index for dumps), row counts and norms
    samples_flagged  list[SampleFlag]: the samples the findings name (up to 20 a finding), by sample
    samples / tokens / bytes   read in all; workers (0: in this process), resumed_units (from the journal)
    policy       the thresholds used; elapsed_s; notes
``bool(result)`` is True unless FAIL; ``passed(strict=True)`` only for PASS. ``to_json`` writes the
findings in findings/render.py's form and non-finite numbers as findings/jsonable.py does.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from alignprobe.findings import Finding, render
from alignprobe.findings import exit_status
from alignprobe.findings.jsonable import number


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
        return exit_status.passed(self.verdict)

    def passed(self, strict: bool = False) -> bool:
        return exit_status.passed(self.verdict, strict)

    def codes(self) -> list[str]:
        return [f.code for f in self.findings]

    def finding(self, code: str) -> Finding | None:
        """The first finding with this code, as CompareResult.finding gives it."""
        return next((f for f in self.findings if f.code == code), None)

    def to_dict(self) -> dict:
        return render.record_dict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, sort_keys=True, allow_nan=False)

    @classmethod
    def from_json(cls, text: str) -> "AuditResult":
        raw = json.loads(text)
        raw["findings"] = [render.from_dict(f) for f in raw["findings"]]
        raw["sources"] = [AuditSource(**s) for s in raw["sources"]]
        raw["slices"] = [SliceAudit(**{k: number(v) for k, v in s.items()}) for s in raw["slices"]]
        raw["samples_flagged"] = [SampleFlag(**s) for s in raw["samples_flagged"]]
        return cls(**raw)
