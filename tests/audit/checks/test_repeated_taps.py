"""audit/checks/repeated_taps.py: a slot that equals its neighbour to the last bit in every sample (two
layer ids that landed on one layer)."""

from alignprobe.audit.checks.repeated_taps import RepeatedTaps
from audit_checks import audited, clean_set, sample


def test_a_slot_equal_to_its_neighbour_is_named_with_its_pair():
    samples = []
    for i, s in enumerate(clean_set(4)):
        states = s.states["aux"].clone()
        states[:, 2] = states[:, 1]
        samples.append(sample(f"data_{i}.ckpt", states=states))
    assert audited(RepeatedTaps(), clean_set()) == []
    found = audited(RepeatedTaps(), samples, units=2)
    assert [f.code for f in found] == ["repeated_tap"] and found[0].severity == "error"
    assert list(found[0].evidence["pairs"].values()) == [4]
    assert "aux[1]" in next(iter(found[0].evidence["pairs"])) and "aux[2]" in next(iter(found[0].evidence["pairs"]))
