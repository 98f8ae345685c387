"""findings/make.py: a finding's severity is its code's default, a policy's pin, or an escalation; a cap lowers it."""

from alignprobe.findings import make
from findings_helpers import AuditLike


def test_policy_severity_pins_a_code_and_cap_lowers_it():
    policy = AuditLike(severity={"norm_outlier": "error"})
    assert make("norm_outlier", "t", {}, "", policy=policy).severity == "error"
    assert make("norm_outlier", "t", {}, "", policy=policy, cap="warn").severity == "warn"
    assert make("degenerate", "t", {}, "", severity="error").severity == "error"
