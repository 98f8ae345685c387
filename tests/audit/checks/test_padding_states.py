"""audit/checks/padding_states.py: padding rows (the layout's trailing pad) that carry hidden states."""

import torch

from alignprobe.audit.checks.padding_states import PaddingStates
from audit_checks import audited, sample


def test_padding_rows_that_carry_states_are_counted_and_zero_padding_is_not():
    zero_padded = torch.randn(12, 3, 16).to(torch.bfloat16)
    zero_padded[9:] = 0
    carried = torch.randn(12, 3, 16).to(torch.bfloat16)  # the last 3 rows are padding, and not zero
    assert audited(PaddingStates(), [sample("a.ckpt", states=zero_padded, padding=3)]) == []
    found = audited(PaddingStates(), [sample("a.ckpt", states=zero_padded, padding=3),
                                      sample("b.ckpt", states=carried, padding=3)])
    assert [f.code for f in found] == ["padding_states"] and found[0].severity == "warn"
    assert (found[0].evidence["samples"], found[0].evidence["rows"], found[0].evidence["padded_samples"]) == (1, 3, 2)
