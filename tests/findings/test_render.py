"""findings/render.py: a finding's text rendered once, and its result.json form read back."""

from alignprobe.findings import Note, Subject, make, render


def test_result_json_form_round_trips():
    f = make("numeric_drift", "drift", {"x": 1.0}, "fix", subject=Subject("aux", ("HF[2]",)))
    f = f.with_note(Note("n", {"k": 1}, " more", "", " after"))
    raw = render.to_dict(f)
    assert raw["title"] == "drift more" and raw["fix"] == "fix after" and raw["stream"] == "aux"
    assert render.from_dict(raw) == f
    old = {"code": "numeric_drift", "severity": "warn", "title": "t", "evidence": {}, "fix": "", "stream": "s"}
    assert render.from_dict(old).stream == "s"
