"""What changed between two saved results (``alignprobe diff old.json new.json``).

A nightly gate keeps yesterday's result.json; the diff says whether today is a regression, an
improvement or the known state: the verdict, findings that appeared or went away (by code and
stream), findings whose severity changed, and per-slice metrics that moved beyond their interval.

A metric moved when its change exceeds both (a) the 95% interval of the difference, where the two
runs were sampled (``multiplier * sqrt(se_old**2 + se_new**2)``, the multiplier each result used),
and (b) a resolution floor of ``RESOLUTION`` of the distance from a perfect value to the policy's
warn tolerance (5% of 0.055 = 0.00275 for the rel-RMS with the default policy). The floor keeps
float rounding from a batch size change out of the report; a change too small to move a verdict a
twentieth of the way to the warn line is not one a gate should act on.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from alignprobe.compare.result import CompareResult, SliceMetrics
from alignprobe.compare.sampling import Z95
from alignprobe.findings import SEVERITY_RANK, VERDICTS, Finding, render
from alignprobe.findings.jsonable import jsonable

RESOLUTION = 0.05

EXIT_NO_CHANGE = 0
EXIT_REGRESSION = 1
EXIT_IMPROVEMENT = 4  # 2 is bad input, 3 a bug: README "Exit codes" lists them all

# metric -> (policy key whose warn level sets the floor, how to read it): "higher" is better for a
# cosine, "lower" for an error, "unit" means closer to 1 is better (a norm ratio).
METRICS = {
    "cosine_mean": ("drift_warn_cosine_p1", "higher"),
    "cosine_p1": ("drift_warn_cosine_p1", "higher"),
    "rel_rms": ("drift_warn_rel_rms", "lower"),
    "norm_ratio": ("scale_tolerance", "unit"),
}
_DEFAULT_WARN = {"drift_warn_cosine_p1": 0.95, "drift_warn_rel_rms": 0.055, "scale_tolerance": 0.1}


@dataclasses.dataclass
class FindingChange:
    code: str
    stream: str
    severity: str  # the new severity (for a finding gone: the old one)
    title: str  # as rendered (findings/render.py), for people; the change is judged on code, stream, severity
    old_severity: str = ""  # set for a severity change


@dataclasses.dataclass
class MetricChange:
    stream: str
    label: str
    serve_slice: int
    metric: str
    old: float
    new: float
    interval: float  # the change had to exceed this to count
    worse: bool


@dataclasses.dataclass
class ResultDiff:
    old_verdict: str
    new_verdict: str
    appeared: list[FindingChange]
    gone: list[FindingChange]
    severity_changed: list[FindingChange]
    moved: list[MetricChange]
    slices_compared: int
    notes: list[str] = dataclasses.field(default_factory=list)

    @property
    def regressions(self) -> list[str]:
        out = []
        if VERDICTS.index(self.new_verdict) > VERDICTS.index(self.old_verdict):
            out.append(f"verdict {self.old_verdict} -> {self.new_verdict}")
        out += [f"{f.code} appeared ({f.severity})" for f in self.appeared if f.severity != "info"]
        out += [f"{f.code} {f.old_severity} -> {f.severity}" for f in self.severity_changed
                if SEVERITY_RANK[f.severity] > SEVERITY_RANK[f.old_severity]]
        out += [f"{m.label} {m.metric} worse" for m in self.moved if m.worse]
        return out

    @property
    def improvements(self) -> list[str]:
        out = []
        if VERDICTS.index(self.new_verdict) < VERDICTS.index(self.old_verdict):
            out.append(f"verdict {self.old_verdict} -> {self.new_verdict}")
        out += [f"{f.code} gone" for f in self.gone if f.severity != "info"]
        out += [f"{f.code} {f.old_severity} -> {f.severity}" for f in self.severity_changed
                if SEVERITY_RANK[f.severity] < SEVERITY_RANK[f.old_severity]]
        out += [f"{m.label} {m.metric} better" for m in self.moved if not m.worse]
        return out

    @property
    def kind(self) -> str:
        """"regression" when anything got worse (even if something else got better), else
        "improvement" when anything got better, else "no change"."""
        return "regression" if self.regressions else "improvement" if self.improvements else "no change"

    @property
    def exit_code(self) -> int:
        return {"regression": EXIT_REGRESSION, "improvement": EXIT_IMPROVEMENT}.get(self.kind, EXIT_NO_CHANGE)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form; a metric that turned NaN or infinite is written as findings/jsonable.py says."""
        return {**jsonable(self), "kind": self.kind, "exit_code": self.exit_code,
                "regressions": self.regressions, "improvements": self.improvements}

    def format(self) -> str:
        lines = [f"alignprobe diff: {self.kind.upper()} (verdict {self.old_verdict} -> {self.new_verdict})"]
        for title, changes in (("appeared", self.appeared), ("gone", self.gone)):
            for f in changes:
                where = f" [{f.stream}]" if f.stream else ""
                lines.append(f"  {title:<9}{f.severity:<6}{f.code}{where}: {f.title}")
        for f in self.severity_changed:
            lines.append(f"  severity {f.old_severity} -> {f.severity}: {f.code}")
        for m in self.moved:
            lines.append(f"  {'worse' if m.worse else 'better':<9}{m.stream} {m.label} {m.metric}: "
                         f"{m.old:.6g} -> {m.new:.6g} (beyond ±{m.interval:.2g})")
        if len(lines) == 1:
            lines.append(f"  no finding appeared or went away; no metric of {self.slices_compared} slices moved "
                         "beyond its interval")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def diff_results(old: CompareResult, new: CompareResult) -> ResultDiff:
    old_findings = {(f.code, f.stream): f for f in old.findings}
    new_findings = {(f.code, f.stream): f for f in new.findings}
    appeared = [_change(f) for key, f in new_findings.items() if key not in old_findings]
    gone = [_change(f) for key, f in old_findings.items() if key not in new_findings]
    severity_changed = [
        _change(f, old_findings[key].severity)
        for key, f in new_findings.items()
        if key in old_findings and old_findings[key].severity != f.severity
    ]
    notes = []
    if (old.num_layers, old.hidden_size) != (new.num_layers, new.hidden_size):
        notes.append(f"the results are of different models (N={old.num_layers}, H={old.hidden_size} vs "
                     f"N={new.num_layers}, H={new.hidden_size})")
    old_slices = {_key(s): s for c in old.streams for s in c.slices}
    moved, compared = [], 0
    for comparison in new.streams:
        for s in comparison.slices:
            before = old_slices.get(_key(s))
            if before is None:
                continue
            compared += 1
            moved += _moved(before, s, old, new)
    if not compared and (old.streams or new.streams):
        notes.append("no slice is in both results: only the verdicts and findings were compared")
    return ResultDiff(old.verdict, new.verdict, appeared, gone, severity_changed, moved, compared, notes)


def _change(finding: Finding, old_severity: str = "") -> FindingChange:
    return FindingChange(finding.code, finding.stream, finding.severity, render.title(finding), old_severity)


def _key(s: SliceMetrics) -> tuple[str, int, str]:
    return (s.serve_stream, s.serve_slice, s.label)


def _moved(before: SliceMetrics, after: SliceMetrics, old: CompareResult, new: CompareResult) -> list[MetricChange]:
    out = []
    for metric, (policy_key, better) in METRICS.items():
        a, b = getattr(before, metric), getattr(after, metric)
        if not (math.isfinite(a) and math.isfinite(b)):
            if math.isfinite(a) != math.isfinite(b):  # a value turned NaN/inf, or back
                out.append(MetricChange(after.serve_stream, after.label, after.serve_slice, metric, a, b, math.inf,
                                        worse=math.isfinite(a)))
            continue
        interval = max(_sampling_interval(before, after, metric, old, new), _floor(policy_key, new))
        if abs(b - a) <= interval:
            continue
        if better == "higher":
            worse = b < a
        elif better == "lower":
            worse = b > a
        else:
            worse = abs(math.log(b)) > abs(math.log(a)) if a > 0 and b > 0 else b != 1.0
        out.append(MetricChange(after.serve_stream, after.label, after.serve_slice, metric, a, b, interval, worse))
    return out


def _sampling_interval(before, after, metric, old, new) -> float:
    se_name = {"cosine_mean": "cosine_mean_se", "rel_rms": "rel_rms_se"}.get(metric)
    if se_name is None:
        return 0.0
    ses = [getattr(before, se_name), getattr(after, se_name)]
    if all(se is None for se in ses):
        return 0.0
    if any(se is not None and not math.isfinite(se) for se in ses):
        return math.inf  # a side too small to estimate its error: nothing it says can count
    multiplier = max(float(r.options.get("interval_multiplier") or Z95) for r in (old, new))
    return multiplier * math.sqrt(sum((se or 0.0) ** 2 for se in ses))


def _floor(policy_key: str, result: CompareResult) -> float:
    warn = float(result.policy.get(policy_key, _DEFAULT_WARN[policy_key]))
    distance = 1.0 - warn if policy_key == "drift_warn_cosine_p1" else warn
    return RESOLUTION * distance
