"""Policy: defaults, files (JSON / TOML), overrides, and their effect on the verdict."""

import json

import pytest

from alignprobe.compare import Policy, compare
from alignprobe.findings.tolerances import parse_override
from alignprobe.errors import BadInput
from compare_helpers import AUX, aux_claim, make_samples, write_dump, write_train


def test_files_and_overrides_layer_over_the_defaults(tmp_path):
    (tmp_path / "p.json").write_text(json.dumps({"drift_fail_rel_rms": 0.4, "severity": {"token_shift": "error"}}))
    (tmp_path / "p.toml").write_text('drift_warn_rel_rms = 0.02\n[severity]\ndegenerate = "info"\n')
    p = Policy.from_file(tmp_path / "p.json")
    assert p.drift_fail_rel_rms == 0.4 and p.severity == {"token_shift": "error"}
    assert p.drift_warn_rel_rms == Policy().drift_warn_rel_rms
    q = Policy.from_file(tmp_path / "p.toml", base=p)
    assert q.drift_warn_rel_rms == 0.02 and q.severity == {"token_shift": "error", "degenerate": "info"}
    assert Policy.resolve(str(tmp_path / "p.toml")).drift_warn_rel_rms == 0.02
    assert Policy.resolve({"scale_tolerance": 0.5}).scale_tolerance == 0.5


@pytest.mark.parametrize(
    "content, suffix, message",
    [
        ('{"drift_fail_rel_rm": 1}', ".json", "unknown key"),
        ('{"severity": {"token_shift": "fatal"}}', ".json", "use one of"),
        ('{"severity": {"layer_ofset": "warn"}}', ".json", "unknown finding code"),
        ("{not json", ".json", "not JSON"),
        ("a = = 1", ".toml", "not valid TOML"),
        ('{"drift_warn_rel_rms": "big"}', ".json", "must be a number"),
        ('{"drift_warn_rel_rms": 0.5, "drift_fail_rel_rms": 0.1}', ".json", "at least"),
        ("[1, 2]", ".json", "table"),
    ],
)
def test_bad_policy_files_are_one_line_errors(tmp_path, content, suffix, message):
    path = tmp_path / f"p{suffix}"
    path.write_text(content)
    with pytest.raises(BadInput, match=message) as err:
        Policy.from_file(path)
    assert "\n" not in str(err.value)


def test_missing_policy_file(tmp_path):
    with pytest.raises(BadInput, match="cannot read"):
        Policy.from_file(tmp_path / "absent.toml")


def test_parse_override():
    assert parse_override("drift_fail_rel_rms=0.3") == ("drift_fail_rel_rms", 0.3)
    assert parse_override("severity.token_shift=error") == ("severity", {"token_shift": "error"})
    for bad in ("noequals", "x=abc", "=1"):
        with pytest.raises(BadInput):
            parse_override(bad)


def test_policy_changes_the_verdict(tmp_path):
    samples = make_samples(num=4, length=20)
    train = write_train(tmp_path / "t.h5", samples)
    # a serve dump whose samples lack their first token: token_shift, a warning by default
    serve = write_dump(
        tmp_path / "s.h5", samples, {"hidden_states": aux_claim()},
        lambda hf, pre, sid: {"hidden_states": hf[1:, list(AUX)].reshape(len(hf) - 1, -1)},
        ids_fn=lambda ids, sid: ids[1:],
    )
    assert compare(train, serve).verdict == "WARN"
    assert compare(train, serve, {"severity": {"token_shift": "error"}}).verdict == "FAIL"
    assert compare(train, serve, {"severity": {"token_shift": "info"}}).verdict == "PASS"
