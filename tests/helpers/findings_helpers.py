"""What the findings core's tests share: a tolerance set of a judge of their own."""

from __future__ import annotations

import dataclasses

from alignprobe.findings.tolerances import Tolerances


@dataclasses.dataclass(frozen=True, kw_only=True)
class AuditLike(Tolerances):
    JUDGE = "audit"
    RANGES = {"share": (0.0, 0.5, "a share between 0 and 0.5")}
    share: float = 0.05
    run: int = 2
