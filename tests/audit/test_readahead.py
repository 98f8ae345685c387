"""The audit's read-ahead: every file read once, a bounded distance ahead, a vanished file left to the
scan's own read (which names it)."""

from __future__ import annotations

from alignprobe.audit import readahead


def test_files_are_read_in_order_a_bounded_distance_ahead(tmp_path, monkeypatch):
    monkeypatch.setattr(readahead, "AHEAD_BYTES", 2500)
    paths = []
    for i in range(8):
        path = tmp_path / f"f{i}"
        path.write_bytes(bytes([i]) * 1000)
        paths.append(str(path))
    paths.insert(3, str(tmp_path / "gone"))  # vanished between the plan and the read
    read = []
    real = readahead.read_through
    monkeypatch.setattr(readahead, "read_through", lambda p, b: (read.append(p), real(p, b)))
    with readahead.ReadAhead(paths) as ahead:
        for i in range(len(paths)):
            ahead.ready(i)
            assert read[: i + 1] == paths[: i + 1]  # this one is in, in file order
            assert sum(ahead.sizes[i + 1 : ahead._next]) <= 2500 + 1000  # at most one file past the bound
    assert read == paths
