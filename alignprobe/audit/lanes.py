"""A Dask worker's read-ahead across the units it is given one after another (its lane).

cluster.py deals the units to the workers in turn (unit ``i`` to worker ``i % N``) and each task
names the unit its worker is given next. The worker keeps one ReadAhead for its lane between tasks
(module state: a worker process runs its tasks one at a time, threads_per_worker=1), extended by the
next unit's files before this one is scanned: the disk keeps reading into the next unit while this
one's last file is scanned and its partial shipped, as the one-process audit's Window does. With a
read-ahead per task, each worker's disk stream stopped at every unit's end (0.77-0.79x of a raw read
in one process, measured: readahead.Window). Read-ahead stays bounded by ``readahead.AHEAD_BYTES`` a
worker, whatever the lane's length.

A task run out of turn (a unit moved to another worker when its own left, a retry) finds no lane
waiting for it and reads ahead for itself: the result is the same, only the overlap is lost.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Sequence

from alignprobe.audit.readahead import ReadAhead
from alignprobe.audit.reading import read_ahead_paths
from alignprobe.audit.scan import scan_unit
from alignprobe.audit.units import Unit


@dataclasses.dataclass
class _Lane:
    ahead: ReadAhead
    first: int  # where the expected unit's files start in ahead.paths
    place: int  # the place in the lane of the unit expected next


_held: dict[str, _Lane] = {}
_lock = threading.Lock()


def scan_in_lane(unit: Unit, lane: str, place: int, then: Unit | None) -> dict:
    """scan_unit(unit), ``place``-th of its lane, reading ahead on into ``then`` (the lane's next unit)."""
    if unit.format == "dump":  # read by h5py a sample at a time: nothing to read ahead (reading.py)
        return scan_unit(unit)
    paths = read_ahead_paths(unit)
    with _lock:
        held = _held.pop(lane, None)
    if held is None or held.place != place:
        if held is not None:
            held.ahead.close()
        held = _Lane(ReadAhead(paths), 0, place)
    following = read_ahead_paths(then) if then is not None and then.format != "dump" else []
    held.ahead.extend(following)
    try:
        part = scan_unit(unit, ahead=held.ahead.window(held.first))
    except BaseException:
        held.ahead.close()
        raise
    if following:
        with _lock:
            _held[lane] = _Lane(held.ahead, held.first + len(paths), place + 1)
    else:
        held.ahead.close()
    return part


def forget(lanes: Sequence[str]) -> int:
    """Close the read-aheads of these lanes still held (an audit that stopped early): how many were."""
    with _lock:
        gone = [_held.pop(lane) for lane in lanes if lane in _held]
    for lane in gone:
        lane.ahead.close()
    return len(gone)
