"""audit/checks/loss_mask.py: how much of the set the loss mask covers (info), and samples it leaves
with nothing to train on."""

import numpy as np
import pytest

from alignprobe.audit.checks.loss_mask import LossMask
from audit_checks import TOKENS, audited, sample


def test_coverage_is_said_and_a_sample_with_no_masked_token_is_named():
    half = np.r_[np.zeros(TOKENS // 2), np.ones(TOKENS // 2)].astype(np.int64)
    samples = [sample(f"data_{i}.ckpt", seed=i, loss_mask=half.copy()) for i in range(3)]
    samples.append(sample("nothing.ckpt", seed=9, loss_mask=np.zeros(TOKENS, np.int64)))
    found = {f.code: f for f in audited(LossMask(), samples, units=2)}
    assert found["loss_mask_coverage"].severity == "info"
    assert found["loss_mask_coverage"].evidence["coverage"] == pytest.approx(18 / 48)
    assert found["empty_loss_mask"].severity == "warn"
    assert found["empty_loss_mask"].evidence["examples"] == [{"sample": "nothing.ckpt", "tokens": TOKENS}]


def test_a_set_without_a_mask_says_nothing():
    assert audited(LossMask(), [sample("data_0.ckpt")]) == []
