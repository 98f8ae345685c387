"""The audit's read-ahead: every file read once, a bounded distance ahead, a vanished file left to the
scan's own read (which names it)."""

from __future__ import annotations

from alignprobe.audit import readahead
from audit_datasets import recorded_read_ahead


def thousand_byte_files(folder, count) -> list[str]:
    paths = []
    for i in range(count):
        path = folder / f"f{i}"
        path.write_bytes(bytes([i]) * 1000)
        paths.append(str(path))
    return paths


def test_files_are_read_in_order_a_bounded_distance_ahead(tmp_path, monkeypatch):
    monkeypatch.setattr(readahead, "AHEAD_BYTES", 2500)
    paths = thousand_byte_files(tmp_path, 8)
    paths.insert(3, str(tmp_path / "gone"))  # vanished between the plan and the read
    _, read = recorded_read_ahead(monkeypatch)
    with readahead.ReadAhead(paths) as ahead:
        for i in range(len(paths)):
            ahead.ready(i)
            assert read[: i + 1] == paths[: i + 1]  # this one is in, in file order
            assert sum(ahead.sizes[i + 1 : ahead._next]) <= 2500 + 1000  # at most one file past the bound
    assert read == paths


def test_files_added_later_are_read_on_within_the_same_bound(tmp_path, monkeypatch):
    """extend() (a Dask worker's next unit, lanes.py): the read-ahead runs on into the added files, still
    at most AHEAD_BYTES (and one file) past the one asked for; a file the last unit ended on and the
    next starts on (records of one file) is read once."""
    monkeypatch.setattr(readahead, "AHEAD_BYTES", 2500)
    paths = thousand_byte_files(tmp_path, 6)
    _, read = recorded_read_ahead(monkeypatch)
    first, then = paths[:3], paths[2:]  # f2 ends the first unit and starts the next
    with readahead.ReadAhead(first) as ahead:
        ahead.extend(then)
        for i in range(len(first)):
            ahead.ready(i)
        assert ahead._next > len(first)  # asked for the first unit's last file: the next unit's are coming
        assert sum(ahead.sizes[len(first) : ahead._next]) <= 2500 + 1000
        window = ahead.window(len(first))
        for i in range(len(then)):
            window.ready(i)
            assert sum(ahead.sizes[len(first) + i + 1 : ahead._next]) <= 2500 + 1000
    assert read == paths  # each once, in order, f2 not twice
