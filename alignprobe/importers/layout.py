"""What a foreign hidden-state layout is to alignprobe: one class a layout, registered in registry.py.

A layout says which files are its own, where each sample lives (a file, or a record inside a file
that holds many), how to read one sample into a :class:`ForeignSample`, and the few facts the
import plan cannot see in the states: the system whose numbering its layer ids follow, the ids its
files store (if any), and what its final state is. Everything else (the streams' claims, pairing,
reading in place, the audit) is written once, for every layout, in importer.py, folder_source.py
and audit/reading.py. A new layout is one new module with one ``Layout`` subclass, plus its line in
registry.py.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from alignprobe.dump.schema import FINAL_NORM_POST
from alignprobe.importers.sample import ForeignSample


@dataclasses.dataclass(frozen=True)
class SampleRef:
    """Where one sample is stored: a file, and its place there when the file holds several."""

    path: str
    record: int | None = None  # None: the file is the sample
    nbytes: int = -1  # the sample's share of the file (for read-ahead budgets); -1: the whole file

    def __str__(self) -> str:
        return self.path if self.record is None else f"{self.path}[{self.record}]"

    @property
    def size(self) -> int:
        return self.nbytes if self.nbytes >= 0 else os.path.getsize(self.path)


@dataclasses.dataclass(frozen=True)
class IdsFit:
    """The layer ids as the files order them, and which slices of the file's aux tensor they are."""

    ids: list[int]  # one id per aux slice kept (the layout's own numbering)
    aux_slices: int  # leading slices of the aux tensor that form the aux stream
    tail_final_norm: str = ""  # set when the slices after them are the final state: its norm (pre/post)
    notes: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class DatasetRow:
    """A sample's row in the dataset its trainer pairs the states file with (speculators' prepare-data
    dataset beside the folder): the token ids and loss mask the trainer takes, or why there is none."""

    token_ids: np.ndarray | None = None
    loss_mask: np.ndarray | None = None
    missing: str = ""  # why the row cannot be read: the audit's one-line note


@dataclasses.dataclass(frozen=True)
class FileKeys:
    """What the first readable candidate file holds at its top level, for layouts that share a suffix."""

    keys: frozenset[str]  # a dict's keys, or the first record's for a list of dicts
    records: bool = False  # a list of dicts, one a sample


class Layout:
    """One foreign layout. Subclasses set the names and override the hooks their files need."""

    name: str = ""  # the format's name: --system value, provenance engine, audit unit format
    described: str = ""  # how the files look, for the line that lists the known layouts
    convention_name: str = ""  # the system in alignprobe.conventions whose layer numbering applies
    has_default_ids: bool = True  # the system has default ids an import may assume when none are given
    pads_right: bool = False  # a sample may end in batch padding (pad id 0, loss_mask 0) to drop
    read_ahead: bool = True  # reading a sample's file into the page cache ahead pays (it is about one sample)
    mappable: bool = False  # each sample is a zip checkpoint torch.load can map (read in place without a copy)
    final_norm: str = FINAL_NORM_POST  # what the final-state tensor is, where the files store one apart
    aliases: tuple[str, ...] = ()  # other --system values that name this layout (a backend of it)
    negative_ids: tuple[int, ...] = ()  # negative layer ids this system's numbering gives a meaning (-1)
    stacked: str = ""  # the file's own [S, L, H] tensor of every slice (hidden_states): the audit names them after it

    # -- which files ---------------------------------------------------------------------------------

    def files(self, path: str) -> list[str]:
        """The files of ``path`` (a folder, or one file) that look like this layout's by name; [] if none."""
        raise NotImplementedError

    def accepts(self, found: FileKeys | None) -> bool:
        """Whether a candidate file holding ``found`` (None: neither a dict nor a list of dicts) is this layout's."""
        return True

    needs_keys: bool = False  # detection reads the first file's keys (layouts that share a suffix)

    def samples(self, path: str, files: list[str]) -> list[SampleRef]:
        """Every sample of the source, in order: one a file unless the layout packs several in one."""
        return [SampleRef(f) for f in files]

    # -- reading -------------------------------------------------------------------------------------

    def read(self, ref: SampleRef, mmap: bool = True, strict: bool = True) -> ForeignSample:
        """One sample as stored. ``strict=False`` (the audit's) takes what an import refuses but a scan
        can judge (rows that differ from the tokens, widths that do not divide), so the checks report it."""
        raise NotImplementedError

    def read_tokens(self, ref: SampleRef) -> tuple[np.ndarray, np.ndarray | None]:
        """Token ids and loss mask (0/1) only; layouts whose files can give them cheaply override this."""
        sample = self.read(ref, mmap=True)
        return sample.token_ids, sample.loss_mask

    # -- what the files cannot say -------------------------------------------------------------------

    def convention(self, first: ForeignSample, system: str | None) -> str:
        """The numbering of this source's layer ids (a layout whose files tell it may look at ``first``)."""
        return self.convention_name or self.name

    def stored_ids(self, source: str) -> list[int] | None:
        """The layer ids the files record about themselves, where they do (None: ask the user)."""
        return None

    def fit_ids(self, ids: list[int], slices: int, num_layers: int, given: bool) -> IdsFit:
        """Match the ids to the file's ``slices``: the default is one id per slice, in the order given."""
        return IdsFit(list(ids), slices)

    def storage_note(self, storage: str) -> str:
        """What the import says of states stored in ``storage`` (a narrower dtype than they are read as)."""
        return f"states stored as {storage}: widened to float32 exactly"

    def final_norm_of(self, mapping_final_norm: str) -> str:
        """What the separately stored final state is (some layouts store the one their numbering implies)."""
        return self.final_norm

    def dataset_row(self, ref: SampleRef, source: str) -> DatasetRow | None:
        """The sample's row in a dataset kept beside the files, where the trainer takes the loss mask from
        one (the audit checks it); None: the files are the whole sample."""
        return None

    @property
    def row_reader(self) -> bool:
        """Whether :meth:`lazy_rows` can read a sample's rows in place (a layout that overrides it)."""
        return type(self).lazy_rows is not Layout.lazy_rows

    def lazy_rows(self, ref: SampleRef):
        """A reader of a sample's rows without decoding it whole (``.rows(a, b)``, ``.token_ids``,
        ``.shape``), or None where this sample must be read whole."""
        return None
