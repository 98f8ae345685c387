"""One audit check at a time on samples built in memory: scanned sample by sample into partials of
``units`` units (a unit's partials merged in order, as the runner and its Dask workers do), then judged."""

from __future__ import annotations

import numpy as np
import torch

from alignprobe.audit.checks.base import Scanned
from alignprobe.audit.policy import AuditPolicy
from alignprobe.audit.rows import row_facts
from alignprobe.audit.sample import AuditSample

H, SLICES, TOKENS = 16, 3, 12


def sample(name: str, seed: int = 0, tokens: int = TOKENS, states: torch.Tensor | None = None,
           token_ids=None, **kw) -> AuditSample:
    """A sample of ``tokens`` rows of ``SLICES`` slices (stream ``aux``), random bf16 states unless given."""
    g = torch.Generator().manual_seed(seed)
    if states is None:
        states = torch.randn(tokens, SLICES, H, generator=g).to(torch.bfloat16)
    ids = np.arange(1, tokens + 1, dtype=np.int64) + 1000 * seed if token_ids is None else np.asarray(token_ids, np.int64)
    return AuditSample(name=name, source="/data/set", token_ids=ids, loss_mask=kw.pop("loss_mask", None),
                       states={"aux": states}, labels={"aux": [f"aux[{j}]" for j in range(states.shape[1])]}, **kw)


def audited(check, samples: list[AuditSample], policy: AuditPolicy | None = None, units: int = 1):
    """The findings of ``check`` on ``samples``, split into ``units`` units merged in order."""
    bounds = np.linspace(0, len(samples), units + 1).round().astype(int)
    merged = check.empty()
    for lo, hi in zip(bounds, bounds[1:]):
        partial = check.empty()
        for s in samples[lo:hi]:
            check.scan(partial, Scanned(s, {name: row_facts(x) for name, x in s.states.items()}))
        if hasattr(check, "finish"):
            check.finish(partial)
        check.merge(merged, partial)
    return check.findings(merged, policy or AuditPolicy())


def clean_set(count: int = 10) -> list[AuditSample]:
    return [sample(f"data_{i}.ckpt", seed=i) for i in range(count)]
