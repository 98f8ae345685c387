"""The one base of every judge's thresholds: checked ranges, a policy file, ``--set``, severities.

compare's :class:`~alignprobe.compare.policy.Policy` and the audit's
:class:`~alignprobe.audit.policy.AuditPolicy` are frozen dataclasses over this base: each declares
its fields (with why each default is where it is), the range each may take (``RANGES``) and the
judge whose codes its ``severity`` table may name. A value is checked when it is set, however it
came (a keyword, a file, ``--set``), so a NaN or negative threshold never silently flags nothing or
everything.
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any, ClassVar, Iterable, Mapping, TypeVar

from alignprobe.errors import BadInput
from alignprobe.findings.codes import codes_of
from alignprobe.findings.severity import SEVERITIES, Severity
from alignprobe.number_ranges import NON_NEGATIVE, Range, checked_number

T = TypeVar("T", bound="Tolerances")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Tolerances:
    # Severity of a finding code, overriding its default (alignprobe/findings/codes.py).
    severity: Mapping[str, Severity] = dataclasses.field(default_factory=dict)  # checked in __post_init__

    JUDGE: ClassVar[str] = ""
    RANGES: ClassVar[dict[str, Range]] = {}  # what each field can mean; any other: a non-negative number
    WHERE: ClassVar[str] = "policy"  # how its messages start

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            if field.name == "severity":
                continue
            value = checked_number(getattr(self, field.name), field.name, self.RANGES.get(field.name, NON_NEGATIVE),
                                   self.WHERE)
            if field.type in ("int", int):
                if not value.is_integer():
                    raise BadInput(f"{self.WHERE}: {field.name} = {value!r} must be a whole number")
                value = int(value)
            object.__setattr__(self, field.name, value)
        self._check_severity()
        self.check()

    def check(self) -> None:
        """Constraints between fields (a fail tolerance beyond its warn one): BadInput where broken."""

    def _check_severity(self) -> None:
        if not isinstance(self.severity, Mapping):
            raise BadInput(f"{self.WHERE}: severity must be a table of finding code = info/warn/error")
        known = codes_of(self.JUDGE)
        unknown = sorted(set(self.severity) - set(known))
        if unknown:
            raise BadInput(f"{self.WHERE}: severity names unknown finding code(s) {', '.join(map(str, unknown))}; "
                           f"codes: {', '.join(sorted(known))}")
        for code, level in self.severity.items():
            if level not in SEVERITIES:
                raise BadInput(f"{self.WHERE}: severity of {code!r} is {level!r}; use one of {', '.join(SEVERITIES)}")
        object.__setattr__(self, "severity", dict(self.severity))

    def severity_of(self, code: str, default: Severity) -> Severity:
        """The severity a finding of ``code`` takes: the table's, which pins the code, else ``default``."""
        return self.severity.get(code) or default

    def to_dict(self) -> dict[str, Any]:
        return {f.name: (dict(getattr(self, f.name)) if f.name == "severity" else getattr(self, f.name))
                for f in dataclasses.fields(self)}

    def updated(self: T, overrides: Mapping[str, Any]) -> T:
        """A copy with ``overrides`` applied; ``severity`` entries merge into the current table."""
        known = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(overrides) - known, key=str)
        if unknown:
            article = "an" if self.JUDGE[:1] in tuple("aeiou") else "a"
            raise BadInput(f"{self.WHERE}: unknown key(s) {', '.join(map(str, unknown))}: not {article} {self.JUDGE} "
                           f"setting; known keys: {', '.join(sorted(known))}")
        values = self.to_dict()
        for key, value in overrides.items():
            if key == "severity":
                if not isinstance(value, Mapping):
                    raise BadInput(f"{self.WHERE}: severity must be a table of finding code = info/warn/error")
                values["severity"] = {**values["severity"], **dict(value)}
            else:
                values[key] = value
        return type(self)(**values)

    @classmethod
    def from_file(cls: type[T], path: str | os.PathLike, base: T | None = None) -> T:
        """A JSON (``.json``) or TOML (any other suffix) file of the same keys over ``base`` (the defaults)."""
        from alignprobe.safe_json import loads_json, loads_toml
        from alignprobe.safe_paths import read_input_bytes

        path = os.fspath(path)
        raw = read_input_bytes(path, "policy file")
        data = loads_json(raw, path) if path.endswith(".json") else loads_toml(raw, path)
        if not isinstance(data, dict):
            raise BadInput(f"{path}: a policy file holds a table of tolerances")
        return (base or cls()).updated(data)

    @classmethod
    def resolve(cls: type[T], policy: "T | Mapping[str, Any] | str | os.PathLike | None") -> T:
        """A ``policy=`` argument from a notebook: an instance, a dict of overrides, a file path, or None."""
        if policy is None:
            return cls()
        if isinstance(policy, cls):
            return policy
        if isinstance(policy, Mapping):
            return cls().updated(policy)
        if isinstance(policy, (str, os.PathLike)):
            return cls.from_file(policy)
        raise BadInput(f"policy must be a {cls.__name__}, a dict of overrides or a file path, "
                       f"not {type(policy).__name__}")


def parse_override(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` from ``--set``: a number, or ``severity.CODE=LEVEL``."""
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


def parse_overrides(texts: Iterable[str]) -> dict[str, Any]:
    """Every ``--set`` of a command as one overrides table (``severity`` entries merged)."""
    merged: dict[str, Any] = {}
    for text in texts:
        key, value = parse_override(text)
        if key == "severity":
            merged["severity"] = {**merged.get("severity", {}), **value}
        else:
            merged[key] = value
    return merged
