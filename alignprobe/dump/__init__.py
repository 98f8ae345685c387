"""The dump: hidden states of a set of prompts captured one way, in a versioned HDF5 file."""

from alignprobe.dump.reader import Block, Dump, open_dump
from alignprobe.dump.schema import (
    FINAL_NORM_POST,
    FINAL_NORM_PRE,
    FORMAT_VERSION,
    ROLE_DRAFTER_INPUT,
    ROLE_FINAL,
    ROLE_LAYERS,
    Provenance,
    StreamClaim,
    hf_label,
)
from alignprobe.dump.writer import DumpWriter

__all__ = [
    "Block",
    "Dump",
    "DumpWriter",
    "FINAL_NORM_POST",
    "FINAL_NORM_PRE",
    "FORMAT_VERSION",
    "Provenance",
    "ROLE_DRAFTER_INPUT",
    "ROLE_FINAL",
    "ROLE_LAYERS",
    "StreamClaim",
    "hf_label",
    "open_dump",
]
