"""findings/codes.py: every code once, with a known judge, a default severity and its docs anchor."""

import pytest

from alignprobe.findings import CODES, codes_of, make


def test_every_code_has_a_known_judge_and_default():
    for c in CODES.values():
        assert c.judges and set(c.judges) <= {"compare", "audit", "accept"}
        assert c.severity in ("info", "warn", "error") and c.doc.endswith("#" + c.name)
    assert "layer_offset" in codes_of("compare") and "norm_outlier" in codes_of("audit")
    assert "nonfinite" in codes_of("audit") and "nonfinite" in codes_of("compare")
    with pytest.raises(KeyError):
        make("no_such_code", "t", {}, "")
