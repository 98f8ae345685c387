"""Validated access to the objects and attributes of an HDF5 file someone else may have written.

The dump reader takes every member and attribute through these functions, so a hostile or damaged
file (a group where a dataset belongs, a soft-link cycle, an external or dangling link, a damaged
object header, a version of 1.5 or "1", complex token ids) becomes one :class:`BadInput` line, and
the values other HDF5 writers store differently (fixed-length strings, integer booleans) are read
as what they mean.
"""

from __future__ import annotations

import os

import h5py
import numpy as np

from alignprobe.errors import BadInput, first_line

_MISSING = object()


def member(group: h5py.Group, path: str, kind: type, where: str):
    """``group[path]`` as a ``kind`` (h5py.Dataset or h5py.Group), each step a hard link."""
    node = group
    for step in path.split("/"):
        try:
            link = node.get(step, getlink=True)
        except (KeyError, OSError, RuntimeError, ValueError) as exc:
            raise BadInput(f"{where}: /{path} cannot be read, the file is damaged ({first_line(exc)})") from None
        if link is None:
            raise BadInput(f"{where}: /{path} is missing" + (" (no streams)" if path == "streams" else ""))
        if isinstance(link, h5py.SoftLink):
            raise BadInput(f"{where}: /{path} is a soft link (to {link.path}); a dump stores its objects in place")
        if isinstance(link, h5py.ExternalLink):
            raise BadInput(f"{where}: /{path} is an external link (to {link.filename}); a dump stores its objects in place")
        try:
            node = node.get(step)
        except (KeyError, OSError, RuntimeError, ValueError) as exc:
            raise BadInput(f"{where}: /{path} cannot be read, the file is damaged ({first_line(exc)})") from None
        if node is None:
            raise BadInput(f"{where}: /{path} cannot be opened, the file is damaged")
    if not isinstance(node, kind):
        found = "a group" if isinstance(node, h5py.Group) else "a dataset" if isinstance(node, h5py.Dataset) else "not a dataset"
        wanted = "a dataset" if kind is h5py.Dataset else "a group"
        raise BadInput(f"{where}: /{path} is {found} where {wanted} belongs")
    if kind is h5py.Dataset:
        _refuse_data_elsewhere(node, path, where)
    return node


def _refuse_data_elsewhere(ds: h5py.Dataset, path: str, where: str) -> None:
    """A virtual dataset or one with external raw storage keeps its values in other files: a missing
    source reads as the fill value (zeros) without any error, so a dump compared that way could PASS
    on values nobody captured. A dump stores its data in place, as it stores its objects."""
    try:
        virtual, external = ds.is_virtual, ds.external
        sources = [s.file_name for s in ds.virtual_sources()] if virtual else [e[0] for e in external or ()]
    except (KeyError, OSError, RuntimeError, ValueError) as exc:
        raise BadInput(f"{where}: /{path} cannot be read, the file is damaged ({first_line(exc)})") from None
    if virtual or external:
        kind = "a virtual dataset" if virtual else "stored in external raw files"
        named = ", ".join(sorted({os.fsdecode(s) for s in sources}))[:200]
        raise BadInput(
            f"{where}: /{path} is {kind} (its values live in {named or 'other files'}); a dump stores its data "
            "in place: copy it into one file (h5repack) or capture it again"
        )


def members(group: h5py.Group, kind: type, where: str, path: str) -> list[tuple[str, object]]:
    """Every member of ``group`` (at ``path``) as a ``kind``, validated as :func:`member` does."""
    try:
        names = list(group.keys())
    except (KeyError, OSError, RuntimeError, ValueError) as exc:
        raise BadInput(f"{where}: /{path} cannot be listed, the file is damaged ({first_line(exc)})") from None
    return [(name, member(group, name, kind, f"{where}")) for name in names]


def raw_attr(obj, key: str, where: str, default=_MISSING):
    try:
        if key not in obj.attrs:
            if default is _MISSING:
                raise BadInput(f"{where} has no {key} attribute")
            return default
        return obj.attrs[key]
    except (KeyError, OSError, RuntimeError, ValueError, TypeError) as exc:
        raise BadInput(f"{where}: attribute {key} cannot be read, the file is damaged ({first_line(exc)})") from None


def as_text(value, what: str, where: str) -> str:
    """A string attribute or element: variable-length (str) or fixed-length (bytes) alike."""
    if isinstance(value, np.ndarray) and value.shape in ((), (1,)):
        value = value.reshape(()).item()
    if isinstance(value, (bytes, np.bytes_)):
        try:
            return bytes(value).decode("utf-8").rstrip("\x00")
        except UnicodeDecodeError:
            raise BadInput(f"{where}: {what} is not UTF-8 text") from None
    if isinstance(value, (str, np.str_)):
        return str(value)
    raise BadInput(f"{where}: {what} must be a string, got {_describe(value)}")


def text_attr(obj, key: str, where: str, default: str | None = None) -> str:
    value = raw_attr(obj, key, where, _MISSING if default is None else None)
    if value is None and default is not None:  # missing; without a default raw_attr refused it
        return default
    return as_text(value, key, where)


def int_attr(obj, key: str, where: str, default: int | None = None) -> int:
    """An integer attribute; 1.5, "1", True or an array is refused."""
    value = raw_attr(obj, key, where, _MISSING if default is None else None)
    if value is None and default is not None:  # missing; without a default raw_attr refused it
        return default
    if isinstance(value, np.ndarray) and value.shape == ():
        value = value[()]
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise BadInput(f"{where}: {key} must be an integer, got {_describe(value)}")
    return int(value)


def bool_attr(obj, key: str, where: str, default: bool) -> bool:
    """A boolean attribute: True/False, or the integers 1/0 other writers store."""
    value = raw_attr(obj, key, where, None)
    if value is None:
        return default
    if isinstance(value, np.ndarray) and value.shape == ():
        value = value[()]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)) and int(value) in (0, 1):
        return bool(value)
    raise BadInput(f"{where}: {key} must be true or false, got {_describe(value)}")


def int_list_attr(obj, key: str, where: str) -> list[int]:
    """A non-empty 1-D integer attribute (a scalar is a list of one)."""
    value = np.atleast_1d(np.asarray(raw_attr(obj, key, where)))
    if value.ndim != 1 or value.size == 0 or value.dtype.kind not in "iu":
        raise BadInput(f"{where}: {key} must be a list of integers, got {_describe(value)}")
    return [int(i) for i in value]


def integer_dataset(ds: h5py.Dataset, name: str, where: str) -> None:
    """Refuse a dataset that is not 1-D integers (token ids, offsets)."""
    if ds.ndim != 1:
        raise BadInput(f"{where}: /{name} has shape {ds.shape}; it must be 1-D")
    if ds.dtype.kind not in "iu":
        raise BadInput(f"{where}: /{name} is stored as {ds.dtype}; it must hold integers")


def _describe(value) -> str:
    if isinstance(value, np.ndarray):
        return f"an array of {value.dtype} with shape {value.shape}"
    text = repr(value)
    return f"{text[:40]}{'...' if len(text) > 40 else ''} ({type(value).__name__})"
