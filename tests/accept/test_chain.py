"""The accept-length arithmetic against the formulas computed another way."""

import math

import torch

from alignprobe.accept.chain import ChainTally, conditional_rates, draft_acceptance


def accept_length_from_rates(conditional: list[float]) -> float:
    """AL = 1 + sum_k prod_{j<=k} p_j (the textbook form, for a table of per-step rates)."""
    total, running = 1.0, 1.0
    for rate in conditional:
        running *= rate
        total += running
    return total


def test_tally_matches_the_textbook_formula_and_counts_chains():
    accepted = torch.tensor([[1, 1, 0, 1, 1], [1, 0, 1, 1, 0], [0, 1, 1, 1, 1]], dtype=torch.float64)
    tally = ChainTally(3)
    tally.add(accepted[:, :2])
    tally.add(accepted[:, 2:])  # samples accumulate exactly
    # chains: t0 accepts 2 (step 3 rejected), t1 accepts 1, t2 accepts 0, t3 accepts 3, t4 accepts 1
    assert tally.per_position == [4 / 5, 2 / 5, 1 / 5]
    assert math.isclose(tally.accept_length, 1 + (2 + 1 + 0 + 3 + 1) / 5)
    assert math.isclose(accept_length_from_rates(conditional_rates(tally.per_position)), tally.accept_length)
    assert tally.top1_rate == [4 / 5, 3 / 5, 4 / 5]


def test_draft_acceptance_is_the_targets_probability_of_the_drafted_token():
    # vLLM's EAGLE drafts are argmax with one-hot draft probabilities: accepted with p_T(draft)
    target = torch.tensor([[0.0, 1.0, 0.0, 3.0], [2.0, 2.0, 0.0, 0.0]])
    drafted = torch.tensor([3, 0])
    for temperature in (0.3, 1.0):
        p = (target / temperature).softmax(-1)
        got = draft_acceptance(drafted, target, temperature)
        assert torch.allclose(got, torch.stack([p[0, 3], p[1, 0]]).double())


def test_engine_walk_keeps_the_expected_acceptance_where_earlier_steps_matched():
    from alignprobe.accept.chain import EngineWalk

    correct = torch.tensor([[1, 0, 1], [0, 1, 1], [1, 1, 0]], dtype=torch.bool)
    probability = torch.tensor([[0.9, 0.2, 0.8], [0.3, 0.6, 0.5], [0.7, 0.4, 0.1]])
    walk = EngineWalk(3)
    walk.add(correct, probability=probability)
    # t0: run 1 -> next t2; t2: run 2 -> done. Expected at t0: 0.9, 1*0.3, 1*0*0.7; at t2: 0.8, 0.5, 1*1*0.1
    assert walk.drafts == 2 and walk.accepted == [2, 1, 0]
    assert all(math.isclose(a, b, rel_tol=1e-6) for a, b in zip(walk.expected_per_position, [(0.9 + 0.8) / 2, (0.3 + 0.5) / 2, 0.1 / 2]))
    assert math.isclose(walk.expected_accept_length, 1 + (0.9 + 0.8 + 0.3 + 0.5 + 0.1) / 2, rel_tol=1e-6)


def test_walk_on_sampled_text_counts_what_a_one_hot_rejection_sampler_accepts():
    """Simulate vLLM's sampler (accept draft x with p(x), else emit a draw from p without x) on random
    distributions; the walk over the emitted text, re-drafted, gives its counters exactly, and the
    expected acceptance agrees with the counts within sampling error."""
    from alignprobe.accept.chain import EngineWalk

    g = torch.Generator().manual_seed(0)
    vocab, steps, length = 6, 3, 4000
    # position-only toy: the target's distribution and the draft depend on the position alone
    probs = (torch.randn(length + steps + 2, vocab, generator=g) * 1.5).softmax(-1)
    draft = torch.randint(0, vocab, (length + steps + 2,), generator=g)  # the drafter's argmax at each position
    text, rounds = [0], []  # rounds: (chain start, drafts accepted)
    while len(text) < length:
        rounds.append([len(text) - 1, 0])
        for _ in range(steps):
            pos = len(text)
            if torch.rand(1, generator=g).item() < probs[pos, draft[pos]].item():
                text.append(int(draft[pos]))
                rounds[-1][1] += 1
                continue
            rest = probs[pos].clone()
            rest[draft[pos]] = 0
            text.append(int(torch.multinomial(rest, 1, generator=g)))
            break
        else:
            text.append(int(torch.multinomial(probs[len(text)], 1, generator=g)))  # bonus token
    text = torch.tensor(text[:length])
    span = length - steps - 1
    # chain start t drafts positions t+1..t+steps (draft step j at position t+j)
    correct = torch.stack([text[j : j + span] == draft[j : j + span] for j in range(1, steps + 1)])
    probability = torch.stack([probs[j : j + span].gather(1, draft[j : j + span, None])[:, 0] for j in range(1, steps + 1)])
    walk = EngineWalk(steps)
    walk.add(correct, probability=probability)
    engine = [n for start, n in rounds if start < span]  # the walk sees starts up to span
    assert walk.drafts == len(engine) and sum(walk.accepted) == sum(engine)
    assert abs(walk.expected_accept_length - walk.accept_length) < 0.05


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
