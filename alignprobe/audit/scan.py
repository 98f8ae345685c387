"""One unit, read start to end: every sample once, every check fed, one partial out.

This is the whole of a worker's job (a plain function, so Dask can ship it): memory is one file's
(or one dump sample's) states plus the checks' bounded partials. The next file is read in a
background thread while the current one is scanned: file reads and numpy/torch arithmetic release
the GIL, so the disk never waits for the arithmetic.
"""

from __future__ import annotations

from alignprobe.audit.checks import Scanned, all_checks
from alignprobe.audit.readahead import Window
from alignprobe.audit.reading import Unreadable, iter_samples
from alignprobe.audit.rows import row_facts
from alignprobe.audit.units import Unit
from alignprobe.dump.readahead import advance_ahead


def scan_unit(unit: Unit, set_threads: bool = True, torch_threads: int = 1, ahead: Window | None = None) -> dict:
    """``{"samples", "tokens", "bytes", "checks": {name: partial}}`` for one unit. ``ahead``: a read-ahead
    that also reads the units scanned after this one (a one-process audit's; see readahead.Window)."""
    import torch

    if not set_threads:  # the caller runs several units at once and set one thread for all
        return _scan(unit, ahead)

    # One thread: the reductions run on pieces of a few MB, where OpenMP's fork/join costs more than
    # it gains, and on a busy machine its spinning threads ran 50x slower (measured: 1.5 GB/s on one
    # thread, 0.02 GB/s on two of a loaded 2-core box). More cores are used by more workers.
    # More is for a one-process audit of an idle many-core host (unmeasured on the H200: the
    # benchmark's "audit (1 process, 4 torch threads)" row measures it).
    threads = torch.get_num_threads()
    torch.set_num_threads(max(1, torch_threads))
    try:
        return _scan(unit, ahead)
    finally:
        torch.set_num_threads(threads)


def _scan(unit: Unit, ahead: Window | None = None) -> dict:
    checks = all_checks()
    partials = {c.name: c.empty() for c in checks}
    samples = tokens = 0
    for item in advance_ahead(iter_samples(unit, ahead)):
        if isinstance(item, Unreadable):
            next(c for c in checks if c.name == "unreadable").failed(partials["unreadable"], item.path, item.reason)
            continue
        scanned = Scanned(item, {stream: row_facts(states) for stream, states in item.states.items()})
        for check in checks:
            check.scan(partials[check.name], scanned)
        samples += 1
        tokens += len(item.token_ids)
    for check in checks:
        if hasattr(check, "finish"):  # a check that batched its work in numpy turns it into JSON here
            check.finish(partials[check.name])
    return {"samples": samples, "tokens": tokens, "bytes": unit.bytes, "checks": partials}


class InOrderMerge:
    """Partials merged in unit order as they arrive in any order: only those that came early are held,
    so the client's memory is the merged partial plus a few units, not every unit's partial."""

    def __init__(self) -> None:
        self.checks = all_checks()
        self.merged = {"samples": 0, "tokens": 0, "bytes": 0, "checks": {c.name: c.empty() for c in self.checks}}
        self._early: dict[int, dict] = {}
        self._next = 0

    def add(self, index: int, part: dict) -> None:
        self._early[index] = part
        while self._next in self._early:
            self._merge(self._early.pop(self._next))
            self._next += 1

    def _merge(self, part: dict) -> None:
        for key in ("samples", "tokens", "bytes"):
            self.merged[key] += part[key]
        for check in self.checks:
            check.merge(self.merged["checks"][check.name], part["checks"][check.name])

