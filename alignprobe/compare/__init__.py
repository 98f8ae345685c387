"""Compare a train-side dump with a serve-side dump: pairing, metrics, mapping search, findings, verdict."""

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
