"""findings/record.py: a finding is frozen; its notes are data beside its text, rendered once."""

import dataclasses

import pytest

from alignprobe.findings import Note, Subject, make, render


def test_finding_is_frozen_and_notes_do_not_touch_its_text():
    f = make("layer_offset", "layer offset +1", {"shift": 1}, "set the ids", subject=Subject("aux", ("HF[3]",)))
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.title = "x"  # type: ignore[misc]
    g = f.with_note(Note("tokens_first", {"samples": 3}, "; tokens shifted", "Fix the tokens first. ", ""))
    assert f.notes == () and g.title == f.title and g.fix == f.fix
    assert render.title(g) == "layer offset +1; tokens shifted"
    assert render.fix(g) == "Fix the tokens first. set the ids"
    assert g.with_note(Note("tokens_first")) is g  # one note of a code
