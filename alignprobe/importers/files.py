"""Open one foreign file safely: torch.save checkpoints (plain or gzip) and safetensors.

``torch.load(weights_only=True)`` only: a training dump downloaded from elsewhere must not be able
to run code on load. Whatever goes wrong becomes one line naming the file.
"""

from __future__ import annotations

import gzip
import io
import os
import pickle
import re
import zipfile

import torch

from alignprobe.errors import BadInput, first_line

INDEX = re.compile(r"^(?:data|hs)_(\d+)\.")


def file_index(path: str) -> int | None:
    """The sample index in a SpecForge/EAGLE ``data_12.ckpt`` or speculators ``hs_12.safetensors`` name."""
    match = INDEX.match(os.path.basename(path))
    return int(match.group(1)) if match else None


def numbered_files(root: str, prefix: str, suffixes: tuple[str, ...]) -> list[str]:
    """Every ``<prefix><idx><suffix>`` in ``root`` or one folder down (SpecForge's ``rows_*/``), by sample
    index; ``root`` itself if it is a file. Deeper folders are not searched: a wrong path (``/``) fails
    fast instead of walking the disk."""
    if os.path.isfile(root):
        return [root]
    folders = [root] + sorted(e.path for e in os.scandir(root) if e.is_dir(follow_symlinks=False))
    found = []
    for folder in folders:
        for entry in os.scandir(folder):
            name = entry.name
            if entry.is_file() and name.startswith(prefix) and name.endswith(suffixes) and file_index(name) is not None:
                found.append(entry.path)
    return sorted(found, key=lambda p: (file_index(p), p))


def load_torch_dict(path: str, mmap: bool = True) -> dict:
    """A ``torch.save`` dict (``.ckpt`` or ``.ckpt.gz``), loaded with ``weights_only=True``.

    ``mmap=False`` reads the file in sequentially: faster when every byte is wanted from a cold disk
    (page faults on a mapped file read it in small pieces)."""
    data = load_torch(path, mmap)
    if not isinstance(data, dict):
        raise BadInput(f"{path}: holds a {type(data).__name__}, not the dict of tensors a hidden-state dump saves")
    return data


def load_torch_records(path: str, mmap: bool = True) -> list[dict]:
    """A ``torch.save`` list of dicts (TensorRT-LLM's SaveState files), each checked as a dict is."""
    data = load_torch(path, mmap)
    if not isinstance(data, list) or not all(isinstance(record, dict) for record in data):
        raise BadInput(f"{path}: holds a {type(data).__name__}, not the list of per-request dicts it should")
    return data


def load_torch(path: str, mmap: bool = True):
    """Whatever a ``torch.save`` file holds (tensors, dicts and lists of them), ``weights_only=True``;
    every dict in it, or in its top-level list, checked to hold dense tensors."""
    try:
        if path.endswith(".gz"):
            with gzip.open(path, "rb") as fh:
                raw = fh.read()
            _check_torch_magic(raw[:4], path)
            data = torch.load(io.BytesIO(raw), map_location="cpu", weights_only=True)
        else:
            with open(path, "rb") as fh:
                _check_torch_magic(fh.read(4), path)
            data = torch.load(path, map_location="cpu", weights_only=True, mmap=mmap and zipfile.is_zipfile(path))
    except (gzip.BadGzipFile, EOFError, zipfile.BadZipFile) as exc:
        raise BadInput(f"{path}: not a readable torch.save file, it is truncated or damaged ({first_line(exc)})") from None
    except pickle.UnpicklingError as exc:
        if "weights_only" in str(exc):
            raise BadInput(
                f"{path}: holds objects other than tensors, which alignprobe will not unpickle "
                "(it loads with weights_only=True so a file cannot run code)"
            ) from None
        raise BadInput(f"{path}: not a torch.save file ({first_line(exc)})") from None
    except (RuntimeError, OSError, ValueError) as exc:
        raise BadInput(f"{path}: not a torch.save file ({first_line(exc)})") from None
    for record in data if isinstance(data, list) else [data]:
        for key, value in record.items() if isinstance(record, dict) else ():
            # weights_only lets sparse (and quantized) tensors through; every reader after this one slices
            # and reshapes dense storage, and failed on them deep inside torch (an internal error).
            if isinstance(value, torch.Tensor) and value.layout != torch.strided:
                raise BadInput(f"{path}: {key} is a {str(value.layout).removeprefix('torch.')} tensor; "
                               "hidden-state dumps hold dense tensors (save it with .to_dense())")
    return data


READ_THROUGH_BYTES = 16 << 20  # one read of read_through (into a buffer reused for the whole file)


def is_mapped_checkpoint(path: str) -> bool:
    """Whether ``load_torch_dict`` maps the file (a zip checkpoint; not gzip, not a legacy pickle)."""
    return not path.endswith(".gz") and zipfile.is_zipfile(path)


def read_through(path: str, buffer: bytearray | None = None) -> None:
    """Read a file once, discarding the bytes, so its pages are in the page cache: a mapped load of it
    then copies from memory. Sequential reads at the disk's speed, the GIL released (a thread's job).
    ``buffer``: the one to read into, reused by a caller that reads many files (one thread only)."""
    try:
        buffer = bytearray(READ_THROUGH_BYTES) if buffer is None else buffer
        with open(path, "rb", buffering=0) as fh:
            while fh.readinto(buffer):
                pass
    except OSError:
        pass  # the reader that maps the file reports what is wrong with it


def _check_torch_magic(head: bytes, path: str) -> None:
    # torch.save writes a zip archive (since torch 1.6) or, in the legacy format, a pickle stream.
    if not (head.startswith(b"PK\x03\x04") or head.startswith(b"\x80")):
        raise BadInput(f"{path}: not a torch.save file (it starts with neither a zip nor a pickle header)")


class SafetensorsFile:
    """One safetensors file opened lazily: tensors are read one at a time."""

    def __init__(self, path: str):
        from safetensors import SafetensorError, safe_open

        self.path = path
        try:
            self._handle = safe_open(path, framework="pt", device="cpu")
            self.keys = set(self._handle.keys())
        except (SafetensorError, OSError, ValueError) as exc:
            raise BadInput(f"{path}: not a readable safetensors file ({first_line(exc)})") from None

    def tensor(self, key: str) -> torch.Tensor:
        return self._handle.get_tensor(key)

    def slice(self, key: str):
        """The tensor's lazy slice: ``f.slice(k)[a:b]`` reads rows ``a..b`` only."""
        return self._handle.get_slice(key)
