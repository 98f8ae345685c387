"""``open_source``: open any hidden-state source as a Dump, importing a foreign one on the way.

This is what ``alignprobe compare`` calls, so a user can compare a SpecForge or speculators
folder without importing it first.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from typing import Sequence

from alignprobe.dump import Dump, open_dump
from alignprobe.importers.detect import DUMP, detect_format
from alignprobe.importers.importer import import_source


def open_source(
    path: str | os.PathLike,
    *,
    layer_ids: Sequence[int] | None = None,
    system: str | None = None,
    config: str | os.PathLike | None = None,
    workdir: str | os.PathLike | None = None,
    num_layers: int | None = None,
    target_config: str | os.PathLike | None = None,
    ids_from: str | os.PathLike | None = None,
    progress: bool = False,
) -> Dump:
    """Our dump as is; a foreign dump imported into ``workdir`` (a temporary folder by default) and opened.

    A temporary folder is removed when the returned Dump is garbage-collected or the process exits.
    With ``workdir`` the import stays there as ``<source name>.h5`` (replaced on each call).
    """
    path = os.fspath(path)
    if detect_format(path) == DUMP:
        return open_dump(path)
    temporary = workdir is None
    folder = tempfile.mkdtemp(prefix="alignprobe-import-") if temporary else os.fspath(workdir)
    os.makedirs(folder, exist_ok=True)
    name = os.path.basename(os.path.normpath(path)) or "source"
    out = os.path.join(folder, f"{name}.h5")
    shutil.rmtree(out + ".partial", ignore_errors=True)  # left by an import that was killed
    try:
        import_source(path, out, system=system, layer_ids=layer_ids, config=config, num_layers=num_layers,
                      target_config=target_config, ids_from=ids_from, overwrite=True, progress=progress)
        dump = open_dump(out)
    except BaseException:
        if temporary:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    if temporary:
        weakref.finalize(dump, shutil.rmtree, folder, True)
    return dump
