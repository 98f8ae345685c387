"""A Dask worker's units scanned through one read-ahead (audit/lanes.py): each file read once, in lane
order, across the units' ends; a unit out of turn reads ahead for itself; the partials are scan_unit's."""

from __future__ import annotations

import json

import pytest

from alignprobe.audit import lanes, readahead
from alignprobe.audit import units as audit_units
from alignprobe.audit.scan import scan_unit
from audit_datasets import make_samples, recorded_read_ahead, write_specforge


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setattr(audit_units, "UNIT_MAX_FILES", 4)
    return write_specforge(tmp_path / "sf", make_samples(16))


@pytest.fixture
def counted(monkeypatch):
    return recorded_read_ahead(monkeypatch)


def same(a, b):
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def test_a_lane_reads_ahead_across_its_units_once_in_order(folder, counted):
    made, read = counted
    units = audit_units.plan_units(str(folder))
    assert len(units) == 4
    alone = [scan_unit(u) for u in units]
    made.clear(), read.clear()
    parts = [lanes.scan_in_lane(u, "lane-a", place, units[place + 1] if place + 1 < len(units) else None)
             for place, u in enumerate(units)]
    assert len(made) == 1 and read == [f for u in units for f in u.files]
    assert all(same(p, q) for p, q in zip(parts, alone))
    assert "lane-a" not in lanes._held  # the last unit closed it


def test_a_unit_out_of_turn_reads_ahead_for_itself_and_forget_closes_a_lane(folder, counted):
    made, read = counted
    units = audit_units.plan_units(str(folder))
    lanes.scan_in_lane(units[0], "lane-b", 0, units[1])
    assert "lane-b" in lanes._held
    part = lanes.scan_in_lane(units[2], "lane-b", 2, units[3])  # place 1 ran elsewhere
    assert len(made) == 2 and made[1][: len(units[2].samples)] == [ref.path for ref in units[2].samples]
    assert same(part, scan_unit(units[2]))
    assert lanes.forget(["lane-b", "lane-never"]) == 1 and not lanes._held
