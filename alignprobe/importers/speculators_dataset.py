"""The loss mask of a speculators folder, read from the dataset ``speculators prepare-data`` saved.

speculators 0.9 (read in its source: scripts/prepare_data.py, data_generation/preprocessing.py,
scripts/data_generation_offline.py, train/data.py): prepare-data saves a Hugging Face dataset
(``save_to_disk``: ``data-*.arrow`` Arrow stream files, ``state.json``) with columns ``input_ids``,
``loss_mask`` and ``seq_len``; the offline generator writes row ``i``'s states to
``<that folder>/hidden_states/hs_{i}.safetensors``, and the trainer pairs them back by that index,
taking ``loss_mask`` from the dataset (and skipping a sample whose ``token_ids`` differ from the
row's ``input_ids``). Nothing is padded on disk: the trainer pads a batch in memory.

pyarrow is an optional dependency (``pip install 'alignprobe[speculators]'``), imported only here.
"""

from __future__ import annotations

import functools
import glob
import os
import re

import numpy as np

from alignprobe.errors import BadInput
from alignprobe.safe_json import load_json_file

INDEX = re.compile(r"hs_(\d+)\.safetensors$")


class Missing(Exception):
    """No mask for this folder; the message is the audit's one-line note."""


def dataset_dir(source: str) -> str:
    """Where prepare-data's dataset sits for a folder of ``hs_*.safetensors``: the folder above."""
    return os.path.dirname(os.path.normpath(source))


@functools.lru_cache(maxsize=4)
def _table(folder: str, stamp: tuple):
    try:
        import pyarrow as pa
    except ImportError:
        raise Missing("pyarrow is not installed, so the loss mask in the speculators dataset beside "
                      f"{folder} is not read (pip install 'alignprobe[speculators]')") from None
    files = _arrow_files(folder)
    tables = []
    for path in files:
        with pa.memory_map(path) as source:  # the buffers stay on the map: pages are read when a row is
            tables.append(pa.ipc.open_stream(source).read_all())
    table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
    for column in ("input_ids", "loss_mask"):
        if column not in table.column_names:
            raise Missing(f"{folder}: the speculators dataset has no {column} column "
                          f"(it has {', '.join(table.column_names)}): no loss mask to check")
    return table


def _arrow_files(folder: str) -> list[str]:
    state = os.path.join(folder, "state.json")
    try:  # the dataset's own list of its files, when it is readable; else its files by name
        names = [entry["filename"] for entry in load_json_file(state, "datasets state.json")["_data_files"]]
        return [os.path.join(folder, name) for name in names]
    except (BadInput, KeyError, TypeError):
        pass
    files = sorted(glob.glob(os.path.join(folder, "data-*.arrow")))
    if not files:
        raise Missing(f"no speculators prepare-data dataset (state.json, data-*.arrow) in {folder}, the folder "
                      "above the hs_*.safetensors files: their loss mask is unknown, so loss-mask coverage, "
                      "empty masks and padding are not checked there")
    return files


def row_of(path: str, source: str) -> tuple[np.ndarray, np.ndarray]:
    """(input_ids, loss_mask) int64 of the dataset row that ``hs_{i}.safetensors`` was extracted from."""
    folder = dataset_dir(source)
    match = INDEX.search(os.path.basename(path))
    if match is None:
        raise Missing(f"{path}: not named hs_<index>.safetensors, so its dataset row is unknown")
    try:
        stamp = tuple((p, os.stat(p).st_mtime_ns) for p in _arrow_files(folder))
        table = _table(folder, stamp)
    except OSError as exc:
        raise Missing(f"{folder}: the speculators dataset cannot be read ({exc})") from None
    except Exception as exc:  # pyarrow's own errors: a damaged or foreign Arrow file
        if isinstance(exc, Missing):
            raise
        raise Missing(f"{folder}: the speculators dataset cannot be read ({type(exc).__name__}: {exc})") from None
    index = int(match.group(1))
    if index >= table.num_rows:
        raise Missing(f"{path}: row {index} is past the dataset's {table.num_rows} rows")
    ids = np.asarray(table.column("input_ids")[index].values, dtype=np.int64)
    mask = np.asarray(table.column("loss_mask")[index].values, dtype=np.int64)
    return ids, mask
