"""explain/channel_scale.py: a per-channel weight on one side (a norm applied on one side only), in its
three forms: the weight alone, RMSNorm's and LayerNorm's."""

import numpy as np
import pytest

from explain_rows import H, explained


def test_a_per_channel_weight_is_named_with_its_statistics():
    w = np.random.default_rng(3).uniform(0.5, 2.0, H).astype(np.float32)
    e = explained(lambda t, s, p, end: t[(2, "post")] * w)
    assert e.winner.name == "channel_scale" and e.winner.params["form"] == "weight"
    assert e.winner.params["weight_mean"] == pytest.approx(float(w.mean()), rel=0.02)


def test_a_layernorm_on_one_side_is_its_own_form():
    def layernorm(t, s, p, end):
        x = t[(2, "post")]
        x = x - x.mean(axis=1, keepdims=True)
        return x / np.sqrt(np.mean(x * x, axis=1, keepdims=True))
    e = explained(layernorm, mean=1.5)
    assert e.winner.name == "channel_scale" and e.winner.params["form"] == "layernorm"
    # an RMSNorm stays the rmsnorm form
    e = explained(lambda t, s, p, end: t[(2, "post")] / np.sqrt(np.mean(t[(2, "post")] ** 2, axis=1, keepdims=True)),
                  mean=1.5)
    assert e.winner.name == "channel_scale" and e.winner.params["form"] == "rmsnorm"
