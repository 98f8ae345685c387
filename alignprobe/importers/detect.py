"""What a path holds: one of our dumps, or which foreign layout (importers/registry.py lists them)."""

from __future__ import annotations

import os

import h5py

from alignprobe.errors import BadInput
from alignprobe.importers.files import load_torch
from alignprobe.importers.layout import FileKeys, Layout, SampleRef

DUMP = "dump"
DETECT_TRIES = 16  # files tried for the keys before the first one's error is the answer


def detect_format(path: str | os.PathLike) -> str:
    """``dump``, or the name of the foreign layout ``path`` holds; BadInput when it is none of them."""
    path = os.fspath(path)
    if os.path.isfile(path) and h5py.is_hdf5(path):
        return DUMP
    return detect_layout(path)[0].name


def detect_layout(path: str) -> tuple[Layout, list[str]]:
    """The foreign layout of ``path`` and its files. Layouts that share file names (SpecForge and EAGLE
    ge_data's ``data_*.ckpt``, Model-Optimizer's and TensorRT-LLM's ``*.pt``) are told apart by the keys
    of the first readable file; a damaged first file must not hide the rest (the audit names it)."""
    from alignprobe.importers.registry import LAYOUTS

    if not os.path.exists(path):
        raise BadInput(f"{path}: no such file or directory")
    keys_of: dict[str, tuple[str, FileKeys | str]] = {}
    refused = []
    for layout in LAYOUTS:
        files = layout.files(path)
        if not files:
            continue
        if not layout.needs_keys:
            return layout, files
        first = files[0]
        if first not in keys_of:
            keys_of[first] = _first_keys(files)
        where, keys = keys_of[first]
        if layout.accepts(keys if isinstance(keys, FileKeys) else None):
            return layout, files
        refused.append((where, keys, layout))
    if refused:
        where, keys, _ = refused[0]
        shown = f"keys {', '.join(sorted(keys.keys))}" if isinstance(keys, FileKeys) else \
            f"a {keys}, not the dict of tensors (or list of them) a hidden-state dump saves"
        raise BadInput(f"{where}: holds {shown}; expected one of: {', '.join(layout.described for _, _, layout in refused)}")
    raise BadInput(f"{path}: neither an alignprobe dump nor a known hidden-state dump "
                   f"({', '.join(_described())})")


def sample_refs(path: str) -> tuple[Layout, list[SampleRef]]:
    """The layout of a foreign source and every sample in it, in order."""
    layout, files = detect_layout(path)
    refs = layout.samples(path, files)
    if not refs:
        raise BadInput(f"{path}: a {layout.described} source that holds no samples")
    return layout, refs


def _described() -> list[str]:
    from alignprobe.importers.registry import LAYOUTS

    return [layout.described for layout in LAYOUTS]


def _first_keys(files: list[str]) -> tuple[str, FileKeys | str]:
    """The first readable file and what it holds: its keys, or the name of its type when it is neither
    a dict nor a list of dicts."""
    first_error = None
    for path in files[:DETECT_TRIES]:
        try:
            data = load_torch(path, mmap=True)
        except BadInput as exc:
            first_error = first_error or exc
            continue
        if isinstance(data, dict):
            return path, FileKeys(frozenset(data))
        if isinstance(data, list) and data and all(isinstance(r, dict) for r in data):
            return path, FileKeys(frozenset(data[0]), records=True)
        return path, type(data).__name__
    assert first_error is not None
    raise first_error
