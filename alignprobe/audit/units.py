"""Work units: a dataset cut into pieces that a worker reads start to end, sequentially.

A unit is a run of consecutive files of a foreign folder, or a run of consecutive samples of a dump,
of about ``UNIT_BYTES`` on disk. Units depend only on the files, never on the number of workers, so
each unit's partial result is the same wherever it is computed, and the merge (in unit order) is too.
"""

from __future__ import annotations

import dataclasses
import os

from alignprobe.errors import BadInput
from alignprobe.importers.layout import SampleRef

# Big enough that a task's scheduling and start cost vanish next to its read, small enough that 16
# workers get several units each from a 10 GB set. Measured on the H200 host (6 GB SpecForge
# folder, cold): 256 MB units gave 4 dask workers 1.11x of a raw read, 64 MB units 0.69x; the cost is
# that a small .ckpt.gz set (1.2 GB: 5 units) keeps 16 workers no faster than 4 (benchmarks/README.md).
UNIT_BYTES = 256 << 20
UNIT_MAX_FILES = 512  # files (or dump samples) a unit: small files are many


@dataclasses.dataclass(frozen=True)
class Unit:
    source: str  # the PATH argument (absolute)
    format: str  # dump, or the foreign layout's name (importers/registry.py)
    samples: tuple[SampleRef, ...]  # a foreign unit's samples, or the one dump
    first: int = 0  # dump units: samples [first, stop)
    stop: int = 0
    bytes: int = 0

    @property
    def files(self) -> list[str]:
        """The distinct files behind the unit's samples, in order."""
        return list(dict.fromkeys(ref.path for ref in self.samples))

    @property
    def key(self) -> str:
        """Names the unit in the journal: the same files (and sizes, mtimes) give the same key."""
        stamp = [f"{self.samples[0]}..{self.samples[-1]}"] if self.samples[0].record is not None else []
        for path in self.files:
            st = os.stat(path)
            stamp.append(f"{os.path.relpath(path, self.source) if os.path.isdir(self.source) else os.path.basename(path)}"
                         f":{st.st_size}:{st.st_mtime_ns}")
        return f"{self.format}|{self.source}|{self.first}-{self.stop}|{'|'.join(stamp)}"


def plan_units(source: str) -> list[Unit]:
    """Every unit of one dataset path, in file order."""
    from alignprobe.importers.detect import DUMP, detect_format, sample_refs

    source = os.path.abspath(os.fspath(source))
    if detect_format(source) == DUMP:
        return _dump_units(source)
    layout, refs = sample_refs(source)
    units: list[Unit] = []
    batch: list[SampleRef] = []
    size = 0
    for ref in refs:
        batch.append(ref)
        size += ref.size
        if size >= UNIT_BYTES or len(batch) >= UNIT_MAX_FILES:
            units.append(Unit(source, layout.name, tuple(batch), bytes=size))
            batch, size = [], 0
    if batch:
        units.append(Unit(source, layout.name, tuple(batch), bytes=size))
    return units


def _dump_units(path: str) -> list[Unit]:
    from alignprobe.dump import open_dump

    with open_dump(path) as dump:
        row_bytes = sum(c.width * dump.dataset(name).dtype.itemsize for name, c in dump.streams.items())
        offsets = dump.offsets
        n = dump.num_samples
    if n == 0:
        raise BadInput(f"{path}: the dump holds no samples: nothing to audit")
    units, first = [], 0
    while first < n:
        stop = first + 1
        while stop < n and stop - first < UNIT_MAX_FILES and (offsets[stop + 1] - offsets[first]) * row_bytes < UNIT_BYTES:
            stop += 1
        units.append(Unit(path, "dump", (SampleRef(path),), first, stop, int((offsets[stop] - offsets[first]) * row_bytes)))
        first = stop
    return units
