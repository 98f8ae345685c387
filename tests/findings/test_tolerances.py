"""findings/tolerances.py: tolerances checked whatever their source (a policy file, --set), and --set parsed once."""

import math

import pytest

from alignprobe.errors import BadInput
from alignprobe.findings.tolerances import parse_overrides
from findings_helpers import AuditLike


def test_tolerances_checked_whatever_their_source():
    assert AuditLike().updated({"run": 3.0}).run == 3 and isinstance(AuditLike().updated({"run": 3.0}).run, int)
    for bad in ({"share": 0.7}, {"share": math.nan}, {"run": 2.5}, {"nope": 1}, {"severity": {"layer_offset": "warn"}},
                {"severity": {"norm_outlier": "fatal"}}):
        with pytest.raises(BadInput):
            AuditLike().updated(bad)
    assert parse_overrides(["share=0.1", "severity.norm_outlier=info", "severity.nonfinite=warn"]) == {
        "share": 0.1, "severity": {"norm_outlier": "info", "nonfinite": "warn"}}
    for bad in ("share", "=1", "share=x", "share=nan"):
        with pytest.raises(BadInput):
            parse_overrides([bad])
