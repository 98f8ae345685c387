"""audit/checks/rows_tokens.py: samples whose state rows are not one a token, and samples with no tokens."""

import torch

from alignprobe.audit.checks.rows_tokens import RowsTokens
from audit_checks import audited, clean_set, sample


def test_rows_that_are_not_one_a_token_and_empty_samples_are_named():
    truncated = sample("cut.ckpt", states=torch.randn(9, 3, 16).to(torch.bfloat16))  # 12 token ids
    empty = sample("empty.ckpt", tokens=0)
    assert audited(RowsTokens(), clean_set()) == []
    found = {f.code: f for f in audited(RowsTokens(), clean_set(3) + [truncated, empty])}
    assert set(found) == {"rows_tokens_mismatch", "empty_sample"}
    assert found["rows_tokens_mismatch"].evidence["examples"] == [{"sample": "cut.ckpt", "tokens": 12, "rows": {"aux": 9}}]
    assert found["empty_sample"].severity == "warn" and found["empty_sample"].evidence["samples"] == 1
