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
    def conditional(self) -> list[float]:
        rates, before = [], float(self.starts)
        for c in self.chained:
            rates.append(c / before if before else float("nan"))
            before = c
        return rates

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
    visited starts are exactly what a greedy engine computes, and the counters are its counters."""

    steps: int
    drafts: int = 0
    accepted: list = dataclasses.field(default_factory=list)  # per position, as vLLM's accepted_per_pos

    def __post_init__(self) -> None:
        self.accepted = self.accepted or [0] * self.steps

    def add(self, correct, keep=None, start: int = 0) -> None:
        """``correct``: bool [steps, T] (a torch tensor); ``keep``: starts the engine could draft at."""
        runs = correct.long().cumprod(dim=0).sum(dim=0).tolist()  # leading accepted steps per start
        t = start
        while t < len(runs):
            if keep is not None and not keep[t]:
                t += 1
                continue
            n = runs[t]
            self.drafts += 1
            for j in range(n):
                self.accepted[j] += 1
            t += n + 1

    @property
    def per_position(self) -> list[float]:
        return [a / self.drafts for a in self.accepted] if self.drafts else [float("nan")] * self.steps

    @property
    def accept_length(self) -> float:
        return 1.0 + sum(self.accepted) / self.drafts if self.drafts else float("nan")


def accept_length_from_rates(conditional: list[float]) -> float:
    """AL = 1 + sum_k prod_{j<=k} p_j (the textbook form, for a table of per-step rates)."""
    total, running = 1.0, 1.0
    for rate in conditional:
        running *= rate
        total += running
    return total


def sampled_acceptance(draft_logits, target_logits, draft_to_target, temperature: float):
    """Rejection sampling accepts a drafted token with probability sum_x min(p(x), q(x)): p the target's
    distribution, q the drafter's (draft vocab mapped onto the target's; other ids have q = 0)."""
    import torch

    q = (draft_logits / temperature).softmax(-1)
    p = (target_logits / temperature).softmax(-1)[:, draft_to_target]
    return torch.minimum(p, q).sum(-1)
