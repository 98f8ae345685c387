"""The resume journal: one JSON line per finished unit, beside the audit's output.

A killed audit run again with the same output finds the lines of the units it finished (matched by
the unit's key: its files, their sizes and mtimes) and reads only the others. Each line is flushed
and fsynced as the unit finishes; a line cut short by the kill is ignored. The journal is removed
once the audit's result is written.
"""

from __future__ import annotations

import json
import os

from alignprobe.errors import BadInput

VERSION = 3  # 2: template_split partials name samples, loss_mask counts why a mask is absent, dataset_tokens;
# 3: norm_outliers keeps each extreme's token and position, and the high rows by token and position


class Journal:
    def __init__(self, path: str | os.PathLike | None):
        self.path = os.fspath(path) if path is not None else None
        self.done: dict[str, dict] = {}
        self._fh = None
        if self.path and os.path.exists(self.path):
            self.done = _read(self.path)

    def record(self, key: str, partial: dict) -> None:
        if self.path is None:
            return
        if self._fh is None:
            try:
                os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
                self._fh = open(self.path, "a", encoding="utf-8")
            except OSError as exc:
                raise BadInput(f"{self.path}: cannot write the audit journal there ({exc.strerror})") from None
        self._fh.write(json.dumps({"v": VERSION, "unit": key, "partial": partial}, separators=(",", ":")) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def finish(self) -> None:
        self.close()
        if self.path and os.path.exists(self.path):
            os.unlink(self.path)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def _read(path: str) -> dict[str, dict]:
    done = {}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue  # the line the kill cut short
            if isinstance(entry, dict) and entry.get("v") == VERSION and "unit" in entry:
                done[entry["unit"]] = entry["partial"]
    return done
