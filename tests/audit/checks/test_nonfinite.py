"""audit/checks/nonfinite.py: NaN / Inf rows, counted per slice, the first examples named."""

import torch

from alignprobe.audit.checks.nonfinite import NonFinite
from audit_checks import audited, clean_set, sample


def test_nan_and_inf_rows_are_counted_per_slice_on_any_number_of_units():
    states = torch.randn(12, 3, 16).to(torch.bfloat16)
    states[4, 0, 1], states[9, 2, 0] = float("nan"), float("inf")
    samples = clean_set(6) + [sample("data_bad.ckpt", states=states)] + clean_set(3)
    assert audited(NonFinite(), clean_set()) == []
    one, three = audited(NonFinite(), samples), audited(NonFinite(), samples, units=3)
    assert [f.code for f in one] == ["nonfinite"] and one[0].severity == "error"
    assert one[0].evidence == three[0].evidence
    assert one[0].evidence["slices"] == {"set:aux:aux[0]": {"nan_rows": 1, "inf_rows": 0},
                                         "set:aux:aux[2]": {"nan_rows": 0, "inf_rows": 1}}
    assert one[0].evidence["examples"][0]["sample"] == "data_bad.ckpt" and one[0].evidence["examples"][0]["position"] == 4
