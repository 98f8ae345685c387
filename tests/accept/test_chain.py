"""The accept-length arithmetic against the formulas computed another way."""

import math

import torch

from alignprobe.accept.chain import ChainTally, accept_length_from_rates, sampled_acceptance


def test_tally_matches_the_textbook_formula_and_counts_chains():
    accepted = torch.tensor([[1, 1, 0, 1, 1], [1, 0, 1, 1, 0], [0, 1, 1, 1, 1]], dtype=torch.float64)
    tally = ChainTally(3)
    tally.add(accepted[:, :2])
    tally.add(accepted[:, 2:])  # samples accumulate exactly
    # chains: t0 accepts 2 (step 3 rejected), t1 accepts 1, t2 accepts 0, t3 accepts 3, t4 accepts 1
    assert tally.per_position == [4 / 5, 2 / 5, 1 / 5]
    assert math.isclose(tally.accept_length, 1 + (2 + 1 + 0 + 3 + 1) / 5)
    assert math.isclose(accept_length_from_rates(tally.conditional), tally.accept_length)
    assert tally.top1_rate == [4 / 5, 3 / 5, 4 / 5]


def test_sampled_acceptance_is_the_overlap_of_the_two_distributions():
    draft = torch.tensor([[2.0, 0.0, -1.0]])
    target = torch.tensor([[0.0, 1.0, 0.0, 3.0]])  # target vocab 4; draft ids map to 0, 1, 3
    mapping = torch.tensor([0, 1, 3])
    q = draft.softmax(-1)[0]
    p = target.softmax(-1)[0][mapping]
    expected = float(torch.minimum(p, q).sum())
    assert math.isclose(float(sampled_acceptance(draft, target, mapping, 1.0)[0]), expected, rel_tol=1e-6)
    same = sampled_acceptance(torch.tensor([[0.0, 1.0, 0.0, 3.0]]), target, torch.arange(4), 0.7)
    assert math.isclose(float(same[0]), 1.0, rel_tol=1e-6)


def test_engine_walk_drafts_where_a_greedy_engine_would():
    from alignprobe.accept.chain import EngineWalk

    # leading accepted runs per start: t0 3, t1 0, t2 2, t3 1, t4 3, t5 0, t6 1
    correct = torch.tensor([[1, 0, 1, 1, 1, 0, 1], [1, 1, 1, 0, 1, 1, 0], [1, 1, 0, 1, 1, 0, 0]], dtype=torch.bool)
    walk = EngineWalk(3)
    walk.add(correct)
    # drafts at t0 (3 accepted, next at 4), t4 (3, next at 8): two drafts, 6 accepted
    assert walk.drafts == 2 and walk.accepted == [2, 2, 2] and walk.accept_length == 4.0
    walk = EngineWalk(3)
    walk.add(correct, keep=[False, True, True, True, True, True, True])
    # t1 (0 -> t2), t2 (2 -> t5), t5 (0 -> t6), t6 (1 -> t8)
    assert walk.drafts == 4 and walk.accepted == [2, 1, 0]
