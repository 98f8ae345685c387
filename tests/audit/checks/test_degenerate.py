"""audit/checks/degenerate.py: all-zero and constant rows outside the padding; past the fail fraction an error."""

import torch

from alignprobe.audit.checks.degenerate import Degenerate
from audit_checks import audited, clean_set, sample


def test_zero_and_constant_rows_are_counted_and_a_slice_all_zero_is_named():
    zero_slice = torch.randn(12, 3, 16).to(torch.bfloat16)
    zero_slice[:, 1] = 0
    constant_row = torch.randn(12, 3, 16).to(torch.bfloat16)
    constant_row[5, 2] = 0.5
    assert audited(Degenerate(), clean_set()) == []
    found = audited(Degenerate(), [sample("a.ckpt", states=zero_slice), sample("b.ckpt", states=constant_row)])
    assert [f.code for f in found] == ["degenerate"] and found[0].severity == "error"  # past 1% of rows
    slices = found[0].evidence["slices"]
    assert slices["set:aux:aux[1]"]["zero_rows"] == 12 and slices["set:aux:aux[2]"]["constant_rows"] == 1
    assert found[0].evidence["all_zero_slices"] == []  # b.ckpt's aux[1] is not zero
    only = audited(Degenerate(), [sample("a.ckpt", states=zero_slice), sample("c.ckpt", states=zero_slice)])
    assert only[0].evidence["all_zero_slices"] == ["set:aux:aux[1]"] and "set:aux:aux[1]" in only[0].title
