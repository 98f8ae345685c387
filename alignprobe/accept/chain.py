"""Accept length from per-step acceptance: the arithmetic of an engine's draft chain.

A chain of k drafted tokens is verified left to right and stops at the first rejection, so draft
token j counts only when tokens 1..j were all accepted. With ``accepted[j][t]`` the acceptance of
step j at chain start t (0/1 greedy, a probability when sampling), the engine's counters are

    per_position[j] = mean over t of prod_{i<=j} accepted[i][t]    (vLLM: accepted_per_pos[j] / drafts)
    accept length   = 1 + sum_j per_position[j]                     (the bonus token counts 1)

and the conditional rates ``p_j = per_position[j] / per_position[j-1]`` give back the textbook
form AL = 1 + sum_k prod_{j<=k} p_j. Sums are kept so that samples accumulate exactly.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


@dataclasses.dataclass
class ChainTally:
    steps: int
    starts: int = 0  # chain starts counted
    chained: list = dataclasses.field(default_factory=list)  # sum over t of prod_{i<=j} accepted
    top1: list = dataclasses.field(default_factory=list)  # sum over t of accepted[j] alone (teacher-forced top-1)

    def __post_init__(self) -> None:
        self.chained = self.chained or [0.0] * self.steps
        self.top1 = self.top1 or [0.0] * self.steps

    def add(self, accepted: torch.Tensor) -> None:
        """``accepted``: [steps, T] of 0/1 or probabilities (a torch tensor)."""
        import torch

        accepted = accepted.double()
        running = torch.cumprod(accepted, dim=0)
        self.starts += accepted.shape[1]
        for j in range(self.steps):
            self.chained[j] += float(running[j].sum())
            self.top1[j] += float(accepted[j].sum())

    @property
    def per_position(self) -> list[float]:
        return [c / self.starts for c in self.chained] if self.starts else [float("nan")] * self.steps

    @property
    def top1_rate(self) -> list[float]:
        return [c / self.starts for c in self.top1] if self.starts else [float("nan")] * self.steps

    @property
    def accept_length(self) -> float:
        return 1.0 + sum(self.per_position) if self.starts else float("nan")


@dataclasses.dataclass
class EngineWalk:
    """The engine's own walk over a sequence: draft at t, accept the leading run of n correct steps,
    take the target's token as the bonus, draft next at t + n + 1. On a dump of the target's own
    greedy output the accepted drafts ARE the dump's tokens, so the teacher-forced chains at the
    visited starts are exactly what a greedy engine computes, and the counters are its counters.

    The same holds under sampling for vLLM's default EAGLE drafts (argmax, draft probability one-hot):
    the rejection sampler accepts draft x with probability p_T(x) and otherwise emits a token drawn
    from p_T without x, so the emitted text is a plain sample of the target at T and a draft is
    accepted exactly when that sample equals it. On a dump of text sampled at T the walk is one
    draw of the engine's counters; ``expected`` keeps the lower-variance mean at the same starts:
    step j's probability p_T(draft j) where the dump matched steps 1..j-1 (there the dump's
    context is the drafted one)."""

    steps: int
    drafts: int = 0
    accepted: list = dataclasses.field(default_factory=list)  # per position, as vLLM's accepted_per_pos
    expected: list = dataclasses.field(default_factory=list)  # per position, sum of expected acceptance

    def __post_init__(self) -> None:
        self.accepted = self.accepted or [0] * self.steps
        self.expected = self.expected or [0.0] * self.steps

    def add(self, correct, keep=None, start: int = 0, probability=None) -> None:
        """``correct``: bool [steps, T] (a torch tensor); ``keep``: starts the engine could draft at;
        ``probability``: [steps, T] the target's probability of each draft (sampling), or None."""
        runs = correct.long().cumprod(dim=0).sum(dim=0).tolist()  # leading accepted steps per start
        expected = None
        if probability is not None:
            before = _matched_before(correct)
            expected = (before * probability.double()).tolist()
        t = start
        while t < len(runs):
            if keep is not None and not keep[t]:
                t += 1
                continue
            n = runs[t]
            self.drafts += 1
            for j in range(n):
                self.accepted[j] += 1
            if expected is not None:
                for j in range(self.steps):
                    self.expected[j] += expected[j][t]
            t += n + 1

    @property
    def per_position(self) -> list[float]:
        return [a / self.drafts for a in self.accepted] if self.drafts else [float("nan")] * self.steps

    @property
    def accept_length(self) -> float:
        return 1.0 + sum(self.accepted) / self.drafts if self.drafts else float("nan")

    @property
    def expected_per_position(self) -> list[float]:
        return [e / self.drafts for e in self.expected] if self.drafts else [float("nan")] * self.steps

    @property
    def expected_accept_length(self) -> float:
        return 1.0 + sum(self.expected) / self.drafts if self.drafts else float("nan")


def conditional_rates(per_position: list[float]) -> list[float]:
    """Position j's acceptance given positions 1..j-1 were accepted (the per-position rates' ratios)."""
    rates, before = [], 1.0
    for p in per_position:
        rates.append(p / before if before else float("nan"))
        before = p
    return rates


def _matched_before(correct):
    """[steps, T] -> 1 where every earlier step was correct (step 1: always 1)."""
    import torch

    ones = torch.ones_like(correct[:1], dtype=torch.double)
    return torch.cat([ones, correct[:-1].double().cumprod(dim=0)], dim=0)


def draft_acceptance(drafted_target_ids, target_logits, temperature: float):
    """The probability vLLM's rejection sampler accepts each drafted token: p_T(draft), the target's
    softmax at the temperature. vLLM's EAGLE proposer drafts the argmax and passes no draft
    probabilities (``draft_sample_method`` "greedy", its default and the only choice with d2t), so
    the ratio test p(x) / q(x) >= u runs with q(x) = 1 (vllm/v1/sample/rejection_sampler.py,
    ``NO_DRAFT_PROBS``). ``drafted_target_ids``: [T] target ids; ``target_logits``: [T, vocab]."""
    p = (target_logits.double() / temperature).softmax(-1)
    return p.gather(1, drafted_target_ids.long().unsqueeze(1)).squeeze(1)
