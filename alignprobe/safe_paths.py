"""Paths from the command line, checked before anything is read or written.

Inputs: a file alignprobe reads must be a regular file (a FIFO blocks forever, /dev/zero never
ends, a symlink loop or a folder under /proc fails deep inside a library); a folder must be a
folder. Outputs: no output may be one of the command's inputs or lie inside an input folder, with
or without ``--force`` (``--force`` replaces an old output, never a source). Every problem is one
:class:`BadInput` line.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import Mapping

from alignprobe.errors import BadInput

class BadOutputPath(BadInput):
    """An output path that must not be written: an input, a folder, a device, a FIFO. Nothing, not
    even the error record --json would get, goes there."""


# A config, a prompt file, a policy or a result.json larger than this is not one (prompt files of
# millions of lines stay far below it).
MAX_TEXT_BYTES = 4 << 30


def _stat(path: str, what: str) -> os.stat_result:
    try:
        return os.stat(path)
    except FileNotFoundError:
        raise BadInput(f"{path}: cannot read it, no such {what}") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise BadInput(f"{path}: a symlink loop, not a {what}; point at the real file") from None
        raise BadInput(f"{path}: cannot use it as the {what} ({exc.strerror})") from None
    except ValueError:  # a NUL byte: from a config file or a notebook, never from a shell
        raise BadInput(f"{path!r}: holds a NUL byte, which no file name can; give the {what}'s path") from None


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def input_file(path: str | os.PathLike, what: str = "input file") -> str:
    """``path`` if it is a regular file alignprobe can read, else one line saying what it is."""
    path = os.fspath(path)
    mode = _stat(path, what).st_mode
    if not stat.S_ISREG(mode):
        raise BadInput(f"{path}: is {_kind(mode)}, not a {what}; give a regular file")
    if not os.access(path, os.R_OK):
        raise BadInput(f"{path}: the {what} is not readable (permission denied)")
    return path


def input_dir(path: str | os.PathLike, what: str = "folder") -> str:
    """``path`` if it is a readable folder."""
    path = os.fspath(path)
    mode = _stat(path, what).st_mode
    if not stat.S_ISDIR(mode):
        raise BadInput(f"{path}: is {_kind(mode) if not stat.S_ISREG(mode) else 'a file'}, not a {what}")
    return path


def input_path(path: str | os.PathLike, what: str = "input") -> str:
    """A regular file or a folder (sources that may be either: a foreign dump, a model)."""
    path = os.fspath(path)
    mode = _stat(path, what).st_mode
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise BadInput(f"{path}: is {_kind(mode)}, not a {what}; give a regular file or a folder")
    return path


def read_input_bytes(path: str | os.PathLike, what: str = "input file", limit: int = MAX_TEXT_BYTES) -> bytes:
    """The whole content of a (checked) regular file."""
    path = input_file(path, what)
    try:
        if os.path.getsize(path) > limit:
            raise BadInput(f"{path}: {os.path.getsize(path)} bytes is too large for a {what}")
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as exc:
        raise BadInput(f"{path}: cannot read the {what} ({exc.strerror})") from None


def refuse_overlap(outputs: Mapping[str, str | os.PathLike | None], inputs: Mapping[str, str | os.PathLike | None]) -> None:
    """One line if an output path is an input or lies inside an input folder.

    ``outputs`` and ``inputs`` map a flag (``--out``) to a path (None: not given). A dump output also
    owns ``<out>.partial/`` and ``<out>.tmp``, so those are checked too.
    """
    resolved_inputs = [(flag, _real(p)) for flag, p in inputs.items() if p is not None]
    claimed: dict[str, str] = {}  # real path -> the output flag that writes it
    for out_flag, out in outputs.items():
        if out is None:
            continue
        refuse_unusable_name(out, out_flag)
        out_real = _real(out)
        _refuse_shared_output(claimed, out_flag, out_real, os.fspath(out))
        owned = [out_real, out_real + ".partial", out_real + ".tmp"]
        for in_flag, in_real in resolved_inputs:
            for candidate in owned:
                if candidate == in_real or _inside(candidate, in_real):
                    raise BadOutputPath(_overlap_line(out_flag, os.fspath(out), in_flag, in_real, candidate))


def _refuse_shared_output(claimed: dict[str, str], out_flag: str, out_real: str, out: str) -> None:
    """Two outputs on one path: the later overwrote the earlier (``--json o.json --junit o.json`` left
    JUnit XML where a pipeline reads the result). The same record twice (``--json R/result.json
    --report R``, whose result.json is that record) is no conflict."""
    other = claimed.setdefault(out_real, out_flag)
    if other != out_flag and not all(f == "--json" or f.endswith("(result.json)") for f in (other, out_flag)):
        raise BadOutputPath(f"{out_flag} {out} is also the {other} output; one would overwrite the other: give each its own path")


def _overlap_line(out_flag: str, out: str, in_flag: str, in_real: str, candidate: str) -> str:
    if candidate == in_real:
        relation = f"is the {in_flag} input"
    else:
        relation = f"lies inside the {in_flag} folder {in_real}"
    return f"{out_flag} {out} {relation}; alignprobe never writes over its inputs (even with --force): choose another path"


def _real(path: str | os.PathLike) -> str:
    return os.path.realpath(os.path.abspath(os.fspath(path)))


def _inside(child: str, folder: str) -> bool:
    return child.startswith(folder.rstrip(os.sep) + os.sep)


def refuse_unusable_name(path: str | os.PathLike, flag: str) -> None:
    """An empty output path (``--out ""``, an unset shell variable) is refused before any work: it named
    no file, yet some writers took it as the current folder and others failed only after the work. A
    NUL byte (possible from a config file, never from a shell) made the os calls raise ValueError."""
    if not os.fspath(path):
        raise BadOutputPath(f"{flag} is empty; give a path (an unset shell variable expands to nothing)")
    if "\0" in os.fspath(path):
        raise BadOutputPath(f"{flag} {os.fspath(path)!r}: holds a NUL byte, which no file name can; give a path")


def output_folder(path: str | os.PathLike, flag: str) -> str:
    """An output folder that exists as a folder or can be made: one line if it cannot."""
    path = os.fspath(path)
    refuse_unusable_name(path, flag)
    if os.path.exists(path) and not os.path.isdir(path):
        raise BadOutputPath(f"{flag} {path}: exists and is not a folder; choose a folder")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise BadOutputPath(f"{flag} {path}: cannot make the folder ({exc.strerror})") from None
    return path


def write_text_atomic(path: str | os.PathLike, text: str, flag: str = "output") -> None:
    """:func:`replace_atomically`, with a folder or a device at ``path`` refused up front and a
    failure said in one line naming ``flag``."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise BadOutputPath(f"{flag} {path}: is a folder; give a file path")
    if os.path.exists(path) and not os.path.isfile(path):
        raise BadOutputPath(f"{flag} {path}: exists and is not a regular file; give a file path")
    try:
        replace_atomically(path, text)
    except OSError as exc:
        raise BadOutputPath(f"{flag} {path}: cannot write it ({exc.strerror or exc})") from None


def replace_atomically(path: str | os.PathLike, text: str) -> None:
    """The one atomic writer: ``text`` to ``<path>.<pid>.tmp`` beside ``path``, fsynced, then renamed
    over ``path``, so a reader (or a crash) sees the old file or the new one, never half of one. The
    temporary file never outlives a failure; the OSError is the caller's to word."""
    path = os.fspath(path)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.lexists(tmp):
            try:
                os.unlink(tmp)
            except OSError:
                pass


def output_file(path: str | os.PathLike, flag: str) -> str:
    """An output file path that can be written: not a folder, not a device or FIFO, its folder exists."""
    path = os.fspath(path)
    refuse_unusable_name(path, flag)
    if os.path.isdir(path):
        raise BadOutputPath(f"{flag} {path}: is a folder; give a file path")
    if os.path.lexists(path):
        try:
            mode = os.stat(path).st_mode
        except OSError as exc:
            raise BadOutputPath(f"{flag} {path}: cannot use it ({'a symlink loop' if exc.errno == errno.ELOOP else exc.strerror})") from None
        if not stat.S_ISREG(mode):
            raise BadOutputPath(f"{flag} {path}: is {_kind(mode)}; give a regular file path")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise BadOutputPath(f"{flag} {path}: the folder {parent} does not exist")
    return path
