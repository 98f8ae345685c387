"""Prompts taken from an existing dump or training set, so a second capture sees the very same tokens and sample ids.

``--tokens-from train.h5`` (or a SpecForge / speculators folder, read in place, nothing imported):
the serving-side capture replays the training side's token ids,
so no tokenizer or chat template can make the two sides differ. The dump's stream claims also give
the model's shape (N layers, hidden size H), which an engine's HTTP API does not report.
"""

from __future__ import annotations

import dataclasses
import os

from alignprobe.dump import ROLE_DRAFTER_INPUT
from alignprobe.importers.source import open_source
from alignprobe.errors import BadInput
from alignprobe.probes.prompts import Prompt


@dataclasses.dataclass(frozen=True)
class DumpTokens:
    prompts: list[Prompt]
    num_layers: int | None  # N as the dump's claims say, None when its streams disagree
    hidden_size: int | None
    source: str
    drafter_slices: int | None = None  # H-wide slices of the dump's drafter-input stream (the drafter's fc input)


def prompts_from_dump(path: str | os.PathLike, limit: int | None = None, num_layers: int | None = None) -> DumpTokens:
    """Every sample of the dump or foreign folder at ``path`` (its ids and token ids), in its order.

    A folder's sample ids are what ``compare`` gives the same folder (the files' own ids, else the
    content id of the tokens), so the serve dump pairs with the folder sample by sample; a SpecForge
    or speculators folder does not say the target's layer count, so ``num_layers`` is needed there."""
    with open_source(path, in_place=True, num_layers=num_layers) as dump:
        count = dump.num_samples if limit is None else min(limit, dump.num_samples)
        prompts = [Prompt(dump.sample_ids[i], [int(t) for t in dump.token_ids(i)]) for i in range(count)]
        layers = {c.num_layers for c in dump.streams.values()}
        sizes = {c.hidden_size for c in dump.streams.values()}
        inputs = [len(c.hf_indices) for c in dump.streams.values() if c.role == ROLE_DRAFTER_INPUT]
    if not prompts:
        raise BadInput(f"{path}: the dump holds no samples to take tokens from")
    return DumpTokens(
        prompts,
        layers.pop() if len(layers) == 1 else None,
        sizes.pop() if len(sizes) == 1 else None,
        os.fspath(path),
        inputs[0] if len(inputs) == 1 else None,
    )
