"""explain/channel_permutation.py: the expected slice's channels in blocks, the blocks in another order
(a tensor-parallel gather out of rank order), named with the order; rotation fits it too, and loses."""

from explain_rows import H, explained, tried, code_of

ORDER = [2, 0, 3, 1]


def test_blocks_of_channels_out_of_order_are_named_with_the_order():
    def gathered(t, s, p, end):
        x = t[(2, "post")]
        return x.reshape(len(x), len(ORDER), H // len(ORDER))[:, ORDER].reshape(len(x), H)

    e = explained(gathered)
    assert e.winner.name == "channel_permutation" and code_of(e.winner.name) == "channels_permuted"
    assert e.winner.params["order"] == ORDER and e.winner.params["blocks"] == len(ORDER)
    assert tried(e, "rotation").fits  # a permutation is orthogonal: the simpler name wins
