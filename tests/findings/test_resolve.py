"""findings/resolve.py: supersession and notes settled on structured fields, never on text."""

from alignprobe.findings import Annotates, Note, Subject, Supersedes, make, resolve


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
