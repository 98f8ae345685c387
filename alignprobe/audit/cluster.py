"""Where units run: in this process, on a local Dask cluster (``workers=N``), or on an existing one
(``scheduler=ADDRESS``). dask.distributed is an extra (``pip install alignprobe[dask]``).

Results come back as each unit finishes (for the journal), and are merged in unit order afterwards,
so the number of workers never changes the result.
"""

from __future__ import annotations

from typing import Iterator, Sequence

from alignprobe.audit.scan import scan_unit
from alignprobe.audit.units import Unit
from alignprobe.errors import BadInput


def run_units(units: Sequence[Unit], *, workers: int | None = None, scheduler: str | None = None,
              memory_limit: str = "2GiB") -> Iterator[tuple[int, dict]]:
    """``(index into units, partial)`` as units finish."""
    if workers is None and scheduler is None:
        for i, unit in enumerate(units):
            yield i, scan_unit(unit)
        return
    client, cluster = _client(workers, scheduler, memory_limit)
    try:
        from distributed import as_completed

        futures = client.map(scan_unit, list(units), key=[f"audit-{i}-{u.key}" for i, u in enumerate(units)])
        index = {f.key: i for i, f in enumerate(futures)}
        for future in as_completed(futures):
            yield index[future.key], future.result()
            future.release()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _client(workers, scheduler, memory_limit):
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise BadInput("--workers / --scheduler need dask.distributed: pip install 'alignprobe[dask]'") from None
    if scheduler is not None:
        try:
            return Client(scheduler, timeout="20s"), None
        except (OSError, TimeoutError) as exc:
            raise BadInput(f"--scheduler {scheduler}: cannot reach a Dask scheduler there ({exc})") from None
    if workers < 1:
        raise BadInput(f"--workers {workers}: give at least 1")
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, memory_limit=memory_limit,
                           dashboard_address=None)
    return Client(cluster), cluster


