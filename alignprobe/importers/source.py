"""Open any hidden-state source for a comparison: ``open_source`` (one side) and ``open_pair`` (both,
each told what the other knows) read a foreign folder in place (folder_source.py), or import it into
a dump on the way.

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
from alignprobe.importers.folder_source import FolderSource
from alignprobe.importers.importer import import_source


def open_source(
    path: str | os.PathLike,
    *,
    in_place: bool = False,
    layer_ids: Sequence[int] | None = None,
    system: str | None = None,
    config: str | os.PathLike | None = None,
    workdir: str | os.PathLike | None = None,
    num_layers: int | None = None,
    target_config: str | os.PathLike | None = None,
    ids_from: str | os.PathLike | None = None,
    progress: bool = False,
) -> "Dump | FolderSource":
    """The one way to open a hidden-state source for reading: our dump as is; a foreign folder imported
    into a dump on the way and opened, or with ``in_place=True`` (and no ``workdir``) read in place
    (:class:`FolderSource`: no import, no temporary file; a comparison is the same either way).

    An import goes to a temporary folder, removed when the returned Dump is garbage-collected or the
    process exits; with ``workdir`` it stays there as ``<source name>.h5`` (replaced on each call).
    """
    path = os.fspath(path)
    if detect_format(path) == DUMP:
        return open_dump(path)
    facts = dict(layer_ids=layer_ids, system=system, config=config, num_layers=num_layers,
                 target_config=target_config, ids_from=ids_from, progress=progress)
    if in_place and workdir is None:
        return FolderSource(path, **facts)
    temporary = workdir is None
    folder = tempfile.mkdtemp(prefix="alignprobe-import-") if temporary else os.fspath(workdir)
    os.makedirs(folder, exist_ok=True)
    name = os.path.basename(os.path.normpath(path)) or "source"
    out = os.path.join(folder, f"{name}.h5")
    shutil.rmtree(out + ".partial", ignore_errors=True)  # left by an import that was killed
    try:
        import_source(path, out, overwrite=True, **facts)
        dump = open_dump(out)
    except BaseException:
        if temporary:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    if temporary:
        weakref.finalize(dump, shutil.rmtree, folder, True)
    return dump


def open_pair(
    train: str | os.PathLike,
    serve: str | os.PathLike,
    *,
    train_import: dict | None = None,
    serve_import: dict | None = None,
    in_place: bool = True,
) -> tuple[Dump, Dump]:
    """Open both sides of a comparison; a foreign side is read in place (:class:`FolderSource`), or
    imported into a temporary dump on the way with ``in_place=False`` (the result is the same).

    A foreign side that is not told the target's layer count or sample ids takes them from the other
    side when that one is an alignprobe dump: a SpecForge folder knows neither N (only its layer ids)
    nor the ids a capture gave its prompts.
    """
    options = {"train": dict(train_import or {}), "serve": dict(serve_import or {})}
    paths = {"train": os.fspath(train), "serve": os.fspath(serve)}
    ours = {side: detect_format(path) == DUMP for side, path in paths.items()}
    opened: dict[str, Dump] = {}
    try:
        for side in sorted(paths, key=lambda s: not ours[s]):  # ours first: the other side may need it
            other = "serve" if side == "train" else "train"
            if not ours[side] and other in opened:
                reference = opened[other]
                options[side].setdefault("ids_from", reference.path)
                if "num_layers" not in options[side] and "target_config" not in options[side]:
                    options[side]["num_layers"] = max(c.num_layers for c in reference.streams.values())
            opened[side] = open_source(paths[side], in_place=in_place, **options[side])
    except BaseException:
        for dump in opened.values():
            dump.close()
        raise
    return opened["train"], opened["serve"]
