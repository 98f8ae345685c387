"""Tolerances that turn measurements into PASS / WARN / FAIL.

Defaults are documented, with how they were measured, in docs/policy.md (the measurement is
benchmarks/measure_tolerances.py). Override them with a policy file (JSON or TOML, same keys, an
optional ``[severity]`` table mapping a finding code to info/warn/error) and then with explicit
overrides (``alignprobe compare --set drift_fail_rel_rms=0.3``).
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any, Mapping

from alignprobe.compare.result import SEVERITIES
from alignprobe.errors import BadInput
from alignprobe.number_ranges import COSINE, COSINE_DIFFERENCE, FACTOR, FRACTION, NON_NEGATIVE, checked_number


# What each tolerance can mean (alignprobe/number_ranges.py); any other is a non-negative number.
_RANGES = {
    "drift_warn_cosine_p1": COSINE,
    "drift_fail_cosine_p1": COSINE,
    "scale_min_cosine": COSINE,
    "mapping_min_cosine": COSINE,
    "mapping_min_margin": COSINE_DIFFERENCE,
    "mapping_tie_cosine": COSINE_DIFFERENCE,
    "degenerate_fail_fraction": FRACTION,
    "position_growth": FACTOR,
}


@dataclasses.dataclass
class Policy:
    # Numeric drift of a correctly mapped slice: relative RMS error ||b-a||/||a|| over all rows,
    # and the 1st percentile of the per-token cosine. Beyond warn: WARN; beyond fail: FAIL.
    drift_warn_rel_rms: float = 0.055
    drift_fail_rel_rms: float = 0.07
    drift_warn_cosine_p1: float = 0.95
    drift_fail_cosine_p1: float = 0.90
    # Scale: the slice points the right way (cosine p50 at least scale_min_cosine) but its norm
    # ratio ||b||/||a|| is outside [1/(1+t), 1+t].
    scale_tolerance: float = 0.1
    scale_min_cosine: float = 0.98
    # Position drift: rel-RMS of the late positions over the early ones (positions 1..15), flagged
    # when it exceeds this factor and the late rel-RMS is past drift_warn_rel_rms.
    position_growth: float = 3.0
    # Mapping search: a serve slice whose best cosine is below mapping_min_cosine matches no train
    # slice; a best candidate less than mapping_min_margin ahead of the runner-up is ambiguous;
    # candidates within mapping_tie_cosine of the best are told apart by their norm ratio.
    mapping_min_cosine: float = 0.9
    mapping_min_margin: float = 0.002
    mapping_tie_cosine: float = 0.001
    # Explanations (compare/explain/): a transform of a train state fits a serve slice when its
    # held-out rel-RMS is within drift_fail_rel_rms; numeric drift alone (no transform) explains up
    # to explain_drift_rel_rms (benchmarks/measure_explanations.py, docs/policy.md).
    explain_drift_rel_rms: float = 0.2
    # Degenerate (all-zero or constant) rows: a warning, and a failure past this fraction of rows.
    degenerate_fail_fraction: float = 0.01
    # Severity of each finding code, overriding findings.DEFAULT_SEVERITY.
    severity: dict[str, str] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            if field.name == "severity":
                continue
            allowed = _RANGES.get(field.name, NON_NEGATIVE)
            setattr(self, field.name, checked_number(getattr(self, field.name), field.name, allowed, "policy"))
        if not isinstance(self.severity, dict):
            raise BadInput("policy: severity must be a table of finding code = info/warn/error")
        from alignprobe.compare.diagnoses import DEFAULT_SEVERITY  # here: diagnoses imports this module

        unknown = sorted(set(self.severity) - set(DEFAULT_SEVERITY))
        if unknown:
            raise BadInput(
                f"policy: severity names unknown finding code(s) {', '.join(unknown)}; "
                f"codes: {', '.join(sorted(DEFAULT_SEVERITY))}"
            )
        for code, level in self.severity.items():
            if level not in SEVERITIES:
                raise BadInput(f"policy: severity of {code!r} is {level!r}; use one of {', '.join(SEVERITIES)}")
        if self.drift_fail_rel_rms < self.drift_warn_rel_rms:
            raise BadInput("policy: drift_fail_rel_rms must be at least drift_warn_rel_rms")
        if self.drift_fail_cosine_p1 > self.drift_warn_cosine_p1:
            raise BadInput("policy: drift_fail_cosine_p1 must be at most drift_warn_cosine_p1")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def updated(self, overrides: Mapping[str, Any]) -> "Policy":
        """A copy with ``overrides`` applied; ``severity`` entries merge into the current table."""
        known = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise BadInput(f"policy: unknown key(s) {', '.join(unknown)}; known keys: {', '.join(sorted(known))}")
        values = self.to_dict()
        for key, value in overrides.items():
            if key == "severity":
                if not isinstance(value, Mapping):
                    raise BadInput("policy: severity must be a table of finding code = info/warn/error")
                values["severity"] = {**values["severity"], **dict(value)}
            else:
                values[key] = value
        return Policy(**values)

    @classmethod
    def from_file(cls, path: str | os.PathLike, base: "Policy | None" = None) -> "Policy":
        """Read a JSON (``.json``) or TOML (any other suffix) policy file over ``base`` (the defaults)."""
        from alignprobe.safe_json import loads_json, loads_toml
        from alignprobe.safe_paths import read_input_bytes

        path = os.fspath(path)
        raw = read_input_bytes(path, "policy file")
        data = loads_json(raw, path) if path.endswith(".json") else loads_toml(raw, path)
        if not isinstance(data, dict):
            raise BadInput(f"{path}: a policy file holds a table of tolerances")
        return (base or cls()).updated(data)


def parse_override(text: str) -> tuple[str, Any]:
    """``key=value`` from the command line: a number, or ``severity.CODE=LEVEL``."""
    key, sep, value = text.partition("=")
    key, value = key.strip(), value.strip()
    if not sep or not key:
        raise BadInput(f"--set {text!r}: write KEY=VALUE, e.g. --set drift_fail_rel_rms=0.3")
    if key.startswith("severity."):
        return "severity", {key.split(".", 1)[1]: value}
    try:
        number = float(value)
    except ValueError:
        raise BadInput(f"--set {text!r}: {key} takes a number") from None
    if not math.isfinite(number):
        raise BadInput(f"--set {text!r}: {key} takes a finite number")
    return key, number


def resolve_policy(policy: "Policy | Mapping[str, Any] | str | os.PathLike | None") -> Policy:
    """The ``policy=`` argument of compare(): a Policy, a dict of overrides, a file path, or None."""
    if policy is None:
        return Policy()
    if isinstance(policy, Policy):
        return policy
    if isinstance(policy, Mapping):
        return Policy().updated(policy)
    return Policy.from_file(policy)
