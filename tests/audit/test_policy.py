"""The audit's thresholds are a findings.tolerances.Tolerances: a frozen record whose fields are
checked however they are set, with a [severity] table of audit codes, policy files and the one
--set parser, as compare's."""

from __future__ import annotations

import dataclasses

import pytest
from click.testing import CliRunner

import alignprobe
from alignprobe.audit import AuditPolicy
from alignprobe.cli.main import cli
from audit_datasets import make_samples, write_specforge


@pytest.fixture(scope="module")
def outlier_set(tmp_path_factory):
    return write_specforge(tmp_path_factory.mktemp("outlier") / "sf", make_samples(16, faults={"norm": [7], "nan": [3]}))


def test_a_policy_is_frozen_and_its_int_fields_stay_whole():
    policy = AuditPolicy(template_split_min_run=3.0)
    assert policy.template_split_min_run == 3 and isinstance(policy.template_split_min_run, int)
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.norm_outlier_sigmas = 1.0
    with pytest.raises(alignprobe.BadInput, match="whole number"):
        AuditPolicy(template_split_min_run=2.5)
    with pytest.raises(alignprobe.BadInput, match="unknown finding code"):
        AuditPolicy(severity={"numeric_drift": "info"})  # compare's code, not the audit's


def test_severity_pins_a_code_and_a_policy_file_carries_it(outlier_set, tmp_path):
    default = alignprobe.audit(outlier_set)
    assert default.finding("norm_outlier").severity == "warn" and default.verdict == "FAIL"
    pinned = alignprobe.audit(outlier_set, policy={"severity": {"norm_outlier": "error", "nonfinite": "info"}})
    assert pinned.finding("norm_outlier").severity == "error" and pinned.finding("nonfinite").severity == "info"
    assert pinned.policy["severity"] == {"norm_outlier": "error", "nonfinite": "info"}
    path = tmp_path / "audit.toml"
    path.write_text("norm_outlier_sigmas = 8\n[severity]\nnonfinite = \"warn\"\n")
    from_file = alignprobe.audit(outlier_set, policy=str(path))
    assert from_file.verdict == "WARN" and from_file.finding("nonfinite").severity == "warn"


def test_cli_set_severity(outlier_set):
    runner = CliRunner()
    assert runner.invoke(cli, ["audit", outlier_set, "--no-progress"]).exit_code == 1
    done = runner.invoke(cli, ["audit", outlier_set, "--no-progress", "--set", "severity.nonfinite=warn"])
    assert done.exit_code == 0, done.output
    bad = runner.invoke(cli, ["audit", outlier_set, "--no-progress", "--set", "severity.nonfinite=fatal"])
    assert bad.exit_code == 2 and "fatal" in bad.output


def test_slice_findings_name_their_slices(outlier_set):
    result = alignprobe.audit(outlier_set)
    outlier = result.finding("norm_outlier")
    assert outlier.subject.slices == tuple(outlier.evidence["slices"]) and outlier.stream == "aux"
    assert result.finding("nonfinite").subject.slices == ("sf:aux:aux[1]",)
