"""What ``accept`` predicts: plain records (the report reads them; they never import it).

``SideAccept``: one dump run through the drafter. ``per_position[j]``: the share of the engine's drafts
whose tokens 1..j+1 are all accepted (vLLM's ``accepted_tokens_per_pos[j] / drafts``), from the
engine's walk over each sample (``drafts`` rounds: draft, accept the leading correct run, take the
bonus token, draft again); ``conditional[j]``: acceptance of step j+1 given the steps before it were
accepted; ``accept_length`` = 1 + sum(per_position). ``all_starts_*``: the same averaged over every
chain start instead (the walk's positions are a subset); ``top1[j]``: teacher-forced top-1 of step
j+1 alone, over all starts.
With a temperature the walk runs over every start of the dump's (sampled) text, and with the target's
LM head ``sampled_*`` hold the expected acceptance p_T(draft) at the walk's starts (chain.py EngineWalk).

``AcceptResult``: both sides, the drafter checks as findings, ``cost`` = train AL - serve AL, and
``explained_by``: the compare finding code that explains the loss, when there is one.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from alignprobe.findings import SEVERITY_RANK, Finding, render
from alignprobe.findings.jsonable import jsonable, number


@dataclasses.dataclass
class SideAccept:
    dump: str
    stream: str  # the stream that fed the drafter
    hf_indices: list[int]  # what that stream claims
    fed: str  # "fc over the 3H concat" | "H-wide state, fc skipped"
    starts: int  # chain starts scored
    samples: int
    per_position: list[float]
    conditional: list[float]
    top1: list[float]
    accept_length: float
    drafts: int = 0
    all_starts_per_position: list[float] | None = None
    all_starts_accept_length: float | None = None
    temperature: float = 0.0
    sampled_per_position: list[float] | None = None
    sampled_accept_length: float | None = None
    notes: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class AcceptResult:
    drafter: str
    layout: str
    num_draft_tokens: int
    train: SideAccept | None
    serve: SideAccept | None
    findings: list[Finding] = dataclasses.field(default_factory=list)
    explained_by: str = ""  # compare finding code
    explanation: str = ""  # that finding's title
    notes: list[str] = dataclasses.field(default_factory=list)
    elapsed_s: float = 0.0

    @property
    def cost(self) -> float:
        """Accept length lost on the serve side (positive: serving accepts fewer tokens)."""
        if self.train is None or self.serve is None:
            return float("nan")
        return self.train.accept_length - self.serve.accept_length

    @property
    def worst_severity(self) -> str:
        return max((f.severity for f in self.findings), key=SEVERITY_RANK.get, default="info")

    def sentence(self) -> str:
        if self.train is None or self.serve is None:
            return "no prediction: " + "; ".join(render.title(f) for f in self.findings if f.severity == "error")
        line = (f"train AL {self.train.accept_length:.2f}, serve AL {self.serve.accept_length:.2f}: "
                f"this serving setup will cost about {self.cost:.2f} accept length")
        if self.explained_by:
            line += f" ({self.explained_by}: {self.explanation})"
        return line

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: a NaN is written "nan" (findings/jsonable.py); a side not predicted is null."""
        return {**render.record_dict(self), "cost": jsonable(self.cost)}

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> "AcceptResult":
        """What :meth:`to_dict` wrote; older files wrote null for a NaN, which stays None."""
        sides = {k: (SideAccept(**{f.name: _numbers(raw[k][f.name]) if "float" in str(f.type) else raw[k][f.name]
                                   for f in dataclasses.fields(SideAccept) if f.name in raw[k]})
                     if raw.get(k) else None) for k in ("train", "serve")}
        findings = [render.from_dict(x) for x in raw.get("findings", [])]
        plain = {f.name: raw[f.name] for f in dataclasses.fields(cls) if f.name in raw and f.name not in ("train", "serve", "findings")}
        return cls(**plain, **sides, findings=findings)


def _numbers(value: Any) -> Any:
    return [number(v) for v in value] if isinstance(value, list) else number(value)
