"""What a path holds: one of our dumps, or which foreign layout."""

from __future__ import annotations

import os

import h5py

from alignprobe.errors import BadInput
from alignprobe.importers import modelopt, specforge, speculators
from alignprobe.importers.files import load_torch_dict

DUMP, SPECFORGE, SPECULATORS, EAGLE, MODELOPT = "dump", "specforge", "speculators", "eagle", "modelopt"


def detect_format(path: str | os.PathLike) -> str:
    """``dump``, ``specforge``, ``speculators`` or ``eagle``; BadInput when it is none of them."""
    path = os.fspath(path)
    if os.path.isfile(path) and h5py.is_hdf5(path):
        return DUMP
    if not os.path.exists(path):
        raise BadInput(f"{path}: no such file or directory")
    if speculators.list_files(path) and (os.path.isdir(path) or path.endswith(speculators.SUFFIX)):
        return SPECULATORS
    ckpts = specforge.list_files(path) if os.path.isdir(path) or path.endswith(specforge.SUFFIXES) else []
    if ckpts:
        # SpecForge and EAGLE ge_data share file names: the keys of the first readable file tell them
        # apart. A damaged first file must not hide the rest: the audit names it and reads on.
        path, keys = _first_readable(ckpts)
        layout = specforge.layout_of(keys)
        if layout == "eagle":
            return EAGLE
        if layout.startswith("specforge"):
            return SPECFORGE
        raise BadInput(f"{path}: a .ckpt file, but with neither SpecForge's nor EAGLE ge_data's keys")
    pts = modelopt.list_files(path) if os.path.isdir(path) or path.endswith(modelopt.SUFFIX) else []
    if pts:
        first, keys = _first_readable(pts)
        if modelopt.is_modelopt(keys):
            return MODELOPT
        raise BadInput(f"{first}: a .pt file, but without Model-Optimizer's keys ({', '.join(sorted(modelopt.KEYS))})")
    raise BadInput(
        f"{path}: neither an alignprobe dump nor a known hidden-state dump (SpecForge data_*.ckpt, "
        "speculators hs_*.safetensors, EAGLE ge_data data_*.ckpt, Model-Optimizer *.pt)"
    )


def sample_files(fmt: str, path: str) -> list[str]:
    """The sample files of a foreign source of layout ``fmt``, in sample order (its one file, for a file)."""
    if fmt == MODELOPT:
        return modelopt.list_files(path)
    return speculators.list_files(path) if fmt == SPECULATORS else specforge.list_files(path)


DETECT_TRIES = 16  # files tried for the layout before the first one's error is the answer


def _first_readable(ckpts: list[str]) -> tuple[str, dict]:
    first_error = None
    for path in ckpts[:DETECT_TRIES]:
        try:
            return path, load_torch_dict(path, mmap=True)
        except BadInput as exc:
            first_error = first_error or exc
    raise first_error
