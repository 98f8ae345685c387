"""The audit on Dask (audit/cluster.py): units dealt to the workers in turn, each worker's units through
one read-ahead (lanes.py), every file read once, the result the one-process audit's."""

from __future__ import annotations

import pytest

import alignprobe
from alignprobe.audit import readahead
from alignprobe.audit import units as audit_units
from audit_datasets import make_samples, recorded_read_ahead, write_specforge
from tests.audit.test_run import comparable


def test_two_workers_read_ahead_each_through_its_lane(tmp_path, monkeypatch):
    distributed = pytest.importorskip("distributed")
    import dask

    monkeypatch.setattr(audit_units, "UNIT_MAX_FILES", 3)
    folder = write_specforge(tmp_path / "sf", make_samples(24, faults={"nan": [3], "template": list(range(8, 18))}))
    here = alignprobe.audit(folder)
    assert here.sources[0].units == 8
    made, read = recorded_read_ahead(monkeypatch)
    # workers as threads of this process, so the counters see them; no stealing, so each lane is whole
    with dask.config.set({"distributed.scheduler.work-stealing": False}), \
            distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        there = alignprobe.audit(folder, scheduler=cluster.scheduler_address)
    units = audit_units.plan_units(str(folder))
    first_files = sorted(made[i][0] for i in range(len(made)))
    assert len(made) == 2 and first_files == sorted([units[0].files[0], units[1].files[0]])  # units 0, 2, .. and 1, 3, ..
    assert sorted(read) == sorted(f for u in units for f in u.files)  # every file once
    assert comparable(there) == comparable(here) and there.notes == here.notes


def test_local_workers_keep_glibcs_adaptive_malloc(monkeypatch):
    # Dask's nanny sets MALLOC_TRIM_THRESHOLD_, which makes every read buffer an mmap (2x a scan)
    pytest.importorskip("distributed")
    import os

    import dask

    from alignprobe.audit.cluster import _client

    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    client, cluster = _client(1, None, "1GiB")
    try:
        seen = client.run(lambda: os.environ.get("MALLOC_TRIM_THRESHOLD_"))
        threads = client.run(lambda: os.environ.get("OMP_NUM_THREADS"))
    finally:
        client.close()
        cluster.close()
    assert list(seen.values()) == [None]
    assert list(threads.values()) == ["1"]  # Dask's other settings stay
    assert dask.config.get("distributed.nanny.pre-spawn-environ")["MALLOC_TRIM_THRESHOLD_"] == 65536  # restored
