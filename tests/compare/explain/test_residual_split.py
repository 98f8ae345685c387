"""explain/residual_split.py: the serve slice is HF[i] - HF[i-1], a layer's output without the residual."""

from explain_rows import explained, code_of


def test_a_layer_output_without_its_residual_is_named_with_both_indices():
    e = explained(lambda t, s, p, end: t[(2, "post")] - t[(1, "post")])
    assert e.winner.name == "residual_split" and code_of(e.winner.name) == "residual_split"
    assert e.winner.params["hf_index"] == 2 and e.winner.params["minus_hf_index"] == 1
