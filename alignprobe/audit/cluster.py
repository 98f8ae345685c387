"""Where units run: in this process, on a local Dask cluster (``workers=N``), or on an existing one
(``scheduler=ADDRESS``). dask.distributed is an extra (``pip install alignprobe[dask]``).

Results come back as each unit finishes (for the journal), and are merged in unit order afterwards,
so the number of workers never changes the result.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import hashlib
import itertools
import os
import uuid
from typing import Iterator, Sequence

import alignprobe.audit.lanes as lanes_module
from alignprobe.audit.readahead import ReadAhead
from alignprobe.audit.reading import read_ahead_paths
from alignprobe.audit.scan import scan_unit
from alignprobe.audit.units import Unit
from alignprobe.errors import BadInput


def run_units(units: Sequence[Unit], *, workers: int | None = None, scheduler: str | None = None,
              memory_limit: str = "2GiB", threads: int | None = None,
              torch_threads: int = 1) -> Iterator[tuple[int, dict]]:
    """``(index into units, partial)`` as units finish.

    In this process, ``threads`` units are scanned at once (default 1), one after another through one
    read-ahead (readahead.Window: 0.91-1.00x of a raw read on the H200 host). Four threads were 0.67x
    against one's 0.76x then: the threads' reads compete for the one disk stream instead of
    overlapping the sums, so one is the default."""
    if workers is None and scheduler is None:
        yield from _in_threads(units, threads or 1, torch_threads)
        return
    client, cluster = _client(workers, scheduler, memory_limit)
    try:
        yield from _on_dask(client, units, workers or 1)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _on_dask(client, units: Sequence[Unit], expect: int = 1) -> Iterator[tuple[int, dict]]:
    """Unit ``i`` to worker ``i % N``, each worker's units in order, each reading ahead into its next
    (lanes.py). Dealt in turn, not in runs of consecutive units: units finish about in unit order, so
    the client merges them as they come (InOrderMerge) instead of holding all but the first run's until
    it is done and merging them after the last worker stops. Only the partials come back (no states),
    gathered as they finish by as_completed in the client's own thread."""
    from distributed import as_completed

    if not units:
        return
    client.wait_for_workers(expect)  # our own cluster's every worker, else whichever are up
    names = sorted(client.scheduler_info(n_workers=-1)["workers"])
    run = uuid.uuid4().hex[:12]
    lanes = [f"audit-{run}-lane-{w}" for w in range(len(names))]
    futures, index = [], {}
    for i, unit in enumerate(units):
        w, then = i % len(names), units[i + len(names)] if i + len(names) < len(units) else None
        key = f"audit-{run}-{i}-{hashlib.sha1(unit.key.encode()).hexdigest()[:16]}"
        # pinned loosely: a unit whose worker left runs elsewhere (reading ahead for itself there). The
        # priority keeps each worker's units in lane order: submitted one by one, the later ran first
        # (seen: places 0, 3, 2, 1), and every unit read ahead for itself
        futures.append(client.submit(lanes_module.scan_in_lane, unit, lanes[w], i // len(names), then, key=key,
                                     workers=[names[w]], allow_other_workers=True, pure=False,
                                     priority=-(i // len(names))))
        index[key] = i
    try:
        for future, part in as_completed(futures, with_results=True):
            yield index[future.key], part
            future.release()
    finally:
        for future in futures:
            future.release()
        with contextlib.suppress(Exception):  # a worker gone is no reason to fail a finished audit
            client.run(lanes_module.forget, lanes)


def _in_threads(units: Sequence[Unit], threads: int, torch_threads: int = 1) -> Iterator[tuple[int, dict]]:
    import torch

    if threads <= 1 or len(units) <= 1:
        # One read-ahead for every unit in turn: the disk keeps reading through the units' ends (readahead.Window)
        foreign = [u for u in units if u.format != "dump"]
        paths = [path for u in foreign for path in read_ahead_paths(u)]
        with ReadAhead(paths) if foreign else contextlib.nullcontext() as ahead:
            first = 0
            for i, unit in enumerate(units):
                window = None
                if unit.format != "dump":
                    window, first = ahead.window(first), first + len(unit.samples)
                yield i, scan_unit(unit, torch_threads=torch_threads, ahead=window)
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # process-wide: set once here, not by each thread
    try:
        with concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="audit-scan") as pool:
            pending = {}
            queue = iter(enumerate(units))
            for i, unit in itertools.islice(queue, threads * 2):  # a bounded window: memory stays a few files
                pending[pool.submit(scan_unit, unit, False)] = i
            while pending:
                done, _ = concurrent.futures.wait(pending, return_when=concurrent.futures.FIRST_COMPLETED)
                for future in done:
                    i = pending.pop(future)
                    for j, unit in itertools.islice(queue, 1):
                        pending[pool.submit(scan_unit, unit, False)] = j
                    yield i, future.result()
    finally:
        torch.set_num_threads(before)


def _client(workers, scheduler, memory_limit):
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise BadInput("--workers / --scheduler need dask.distributed: pip install 'alignprobe[dask]'") from None
    if scheduler is not None:
        if not scheduler.strip():
            raise BadInput("--scheduler is empty: give the scheduler's address, e.g. tcp://head:8786")
        try:
            return Client(scheduler, timeout="20s"), None
        except (OSError, TimeoutError) as exc:
            raise BadInput(f"--scheduler {scheduler}: cannot reach a Dask scheduler there ({exc})") from None
        except ValueError as exc:  # distributed's own check of the address: no port, an unknown scheme
            raise BadInput(f"--scheduler {scheduler}: not a Dask scheduler address ({exc}); "
                           "give one like tcp://head:8786") from None
    if workers < 1:
        raise BadInput(f"--workers {workers}: give at least 1")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if workers > cores:
        # Each worker is a process with its own memory limit: --workers 100000 started processes
        # until the machine ran out of memory, and more than one a core only queue for the cores.
        raise BadInput(f"--workers {workers}: this machine has {cores} CPU cores, and a local cluster of more "
                       f"processes than cores gains nothing; give at most {cores}, or --scheduler for a larger cluster")
    # Dask's nannies start workers with MALLOC_TRIM_THRESHOLD_=65536, which gives memory back to the
    # system sooner in a long-lived worker but turns off glibc's adaptive mmap threshold: every
    # read buffer then becomes an mmap and its page faults, 2x the scan time a file (audit/rows.py).
    # These workers live for one audit, so they keep glibc's default.
    import dask

    spawn_environ = dask.config.get("distributed.nanny.pre-spawn-environ", {})
    kept = {k: v for k, v in spawn_environ.items() if k != "MALLOC_TRIM_THRESHOLD_"}
    with dask.config.set({"distributed.nanny.pre-spawn-environ": kept}):
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, memory_limit=memory_limit,
                               dashboard_address=None)
    return Client(cluster), cluster


