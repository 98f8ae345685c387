"""audit/checks/short_rows.py: samples of a marked dump the engine returned only some rows for: only those
were audited, and the finding says how many were not seen and why an engine does that."""

import torch

from alignprobe.audit.checks.short_rows import ShortRows
from audit_checks import audited, clean_set, sample


def test_samples_returned_in_part_are_named_with_the_rows_returned():
    short = sample("dump.h5#s3", states=torch.randn(4, 3, 16).to(torch.bfloat16), returned=(8, 12), engine="sglang")
    assert audited(ShortRows(), clean_set()) == []
    found = audited(ShortRows(), clean_set(2) + [short])
    assert [f.code for f in found] == ["short_rows"]
    assert found[0].evidence["rows_not_returned"] == 8 and found[0].evidence["likely_cause"]
    assert found[0].evidence["examples"] == [{"sample": "dump.h5#s3", "rows_returned": 4, "tokens": 12,
                                              "positions_returned": "8-11"}]
