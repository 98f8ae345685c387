"""Compare a train-side dump with a serve-side dump: pairing, metrics, mapping search, findings, verdict.

``alignprobe.compare.compare(train, serve, policy=None, **options)`` is the library call. The package
itself is callable too, so ``alignprobe.compare(train, serve)`` works as the issue promised while
``alignprobe.compare.result`` and friends stay importable as modules.
"""

import sys
import types

from alignprobe.compare.compare import compare
from alignprobe.compare.policy import Policy

from alignprobe.compare.result import (
    Candidate,
    CompareResult,
    Finding,
    MappingSearch,
    PositionBucket,
    RowHealth,
    SliceMatch,
    SliceMetrics,
    StreamComparison,
    TokenCheck,
    TokenIssue,
)

__all__ = [
    "compare",
    "Policy",
    "Candidate",
    "CompareResult",
    "Finding",
    "MappingSearch",
    "PositionBucket",
    "RowHealth",
    "SliceMatch",
    "SliceMetrics",
    "StreamComparison",
    "TokenCheck",
    "TokenIssue",
]


class _CallableModule(types.ModuleType):
    def __call__(self, *args, **kwargs):
        return compare(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
