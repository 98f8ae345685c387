"""Compare a train-side dump with a serve-side dump: pairing, metrics, mapping search, findings, verdict."""

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
