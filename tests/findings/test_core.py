"""The findings core: records, the code registry, resolve, rendering, tolerances, exit status."""

from __future__ import annotations

import dataclasses
import math

import pytest

from alignprobe.errors import BadInput
from alignprobe.findings import CODES, Annotates, Finding, Note, Subject, Supersedes, codes_of, make, resolve
from alignprobe.findings import render
from alignprobe.findings.exit_status import exit_status
from alignprobe.findings.jsonable import jsonable, number
from alignprobe.findings.severity import verdict_of
from alignprobe.findings.tolerances import Tolerances, parse_overrides


@dataclasses.dataclass(frozen=True, kw_only=True)
class AuditLike(Tolerances):
    JUDGE = "audit"
    RANGES = {"share": (0.0, 0.5, "a share between 0 and 0.5")}
    share: float = 0.05
    run: int = 2


def test_finding_is_frozen_and_notes_do_not_touch_its_text():
    f = make("layer_offset", "layer offset +1", {"shift": 1}, "set the ids", subject=Subject("aux", ("HF[3]",)))
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.title = "x"  # type: ignore[misc]
    g = f.with_note(Note("tokens_first", {"samples": 3}, "; tokens shifted", "Fix the tokens first. ", ""))
    assert f.notes == () and g.title == f.title and g.fix == f.fix
    assert render.title(g) == "layer offset +1; tokens shifted"
    assert render.fix(g) == "Fix the tokens first. set the ids"
    assert g.with_note(Note("tokens_first")) is g  # one note of a code


def test_every_code_has_a_known_judge_and_default():
    for c in CODES.values():
        assert c.judges and set(c.judges) <= {"compare", "audit", "accept"}
        assert c.severity in ("info", "warn", "error") and c.doc.endswith("#" + c.name)
    assert "layer_offset" in codes_of("compare") and "norm_outlier" in codes_of("audit")
    assert "nonfinite" in codes_of("audit") and "nonfinite" in codes_of("compare")
    with pytest.raises(KeyError):
        make("no_such_code", "t", {}, "")


def test_policy_severity_pins_a_code_and_cap_lowers_it():
    policy = AuditLike(severity={"norm_outlier": "error"})
    assert make("norm_outlier", "t", {}, "", policy=policy).severity == "error"
    assert make("norm_outlier", "t", {}, "", policy=policy, cap="warn").severity == "warn"
    assert make("degenerate", "t", {}, "", severity="error").severity == "error"


def test_resolve_supersedes_on_the_same_stream_and_keeps_evidence():
    drift = make("numeric_drift", "drift", {"rel_rms": 0.3}, "", subject=Subject("aux"))
    other = make("numeric_drift", "drift", {"rel_rms": 0.2}, "", subject=Subject("final"))
    offset = make("layer_offset", "offset", {"shift": 1}, "", subject=Subject("aux"))
    out = resolve([drift, other, offset], [Supersedes("layer_offset", ("numeric_drift",), keep_evidence=True)])
    assert [f.code for f in out] == ["layer_offset", "numeric_drift"]
    assert out[0].evidence == {"rel_rms": 0.3, "shift": 1} and out[1].stream == "final"


def test_resolve_supersedes_on_other_streams_only_when_the_rule_says():
    here = make("numeric_drift", "drift", {}, "", subject=Subject("aux"))
    there = make("numeric_drift", "drift", {}, "", subject=Subject("layers"))
    offset = make("layer_offset", "offset", {"train_claimed": ["HF[1]"]}, "", subject=Subject("aux"))
    rule = Supersedes("layer_offset", ("numeric_drift",), streams="other", when=lambda f: "train_claimed" in f.evidence)
    assert [f.stream for f in resolve([here, there, offset], [rule])] == ["aux", "aux"]
    plain = make("layer_offset", "offset", {}, "", subject=Subject("aux"))
    assert len(resolve([here, there, plain], [rule])) == 3


def test_resolve_annotates_from_structured_fields():
    shift = make("token_shift", "shift", {"samples": 4}, "")
    drift = make("numeric_drift", "drift", {}, "", subject=Subject("aux"))
    rule = Annotates("token_shift", ("numeric_drift",),
                     lambda f: Note("token_shift_first", {"samples": f.evidence["samples"]}, headline="; shifted"))
    out = resolve([shift, drift], [rule])
    annotated = next(f for f in out if f.code == "numeric_drift")
    assert annotated.notes[0].params == {"samples": 4}


def test_result_json_form_round_trips():
    f = make("numeric_drift", "drift", {"x": 1.0}, "fix", subject=Subject("aux", ("HF[2]",)))
    f = f.with_note(Note("n", {"k": 1}, " more", "", " after"))
    raw = render.to_dict(f)
    assert raw["title"] == "drift more" and raw["fix"] == "fix after" and raw["stream"] == "aux"
    assert render.from_dict(raw) == f
    old = {"code": "numeric_drift", "severity": "warn", "title": "t", "evidence": {}, "fix": "", "stream": "s"}
    assert render.from_dict(old).stream == "s"


def test_one_encoding_of_non_finite_numbers():
    assert jsonable({"a": math.nan, "b": [math.inf, -math.inf, 1.5], "c": None}) == {
        "a": "nan", "b": ["inf", "-inf", 1.5], "c": None}
    assert math.isinf(number("-inf")) and number(2.0) == 2.0


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


def test_verdict_and_exit_status():
    warn = Finding("token_shift", "warn", "t")
    error = Finding("layer_offset", "error", "t")
    assert verdict_of([]) == "PASS" and verdict_of(["warn"]) == "WARN" and verdict_of(["info", "error"]) == "FAIL"
    assert exit_status("WARN", [warn]).code == 0 and exit_status("WARN", [warn], strict=True).code == 1
    assert exit_status("FAIL", [warn, error]).reason == "FAIL: layer_offset"
