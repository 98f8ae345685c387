"""--tokens-from: a dump, or a SpecForge / speculators folder read in place, gives the same ids compare gives it."""

from __future__ import annotations

import pytest

from alignprobe.errors import BadInput
from alignprobe.importers.source import open_source
from alignprobe.probes.dump_prompts import prompts_from_dump
from tests.helpers.audit_datasets import N, make_samples, write_dump, write_specforge, write_speculators


@pytest.mark.parametrize("writer", [write_specforge, write_speculators])
def test_a_training_set_folder_gives_its_tokens_and_compare_ids(writer, tmp_path):
    samples = make_samples(6)
    root = writer(tmp_path / "set", samples)
    tokens = prompts_from_dump(root, num_layers=N)
    with open_source(root, in_place=True, num_layers=N) as folder:
        assert [p.sample_id for p in tokens.prompts] == folder.sample_ids
        for i, p in enumerate(tokens.prompts):
            assert p.token_ids == [int(t) for t in folder.token_ids(i)]
    assert tokens.num_layers == N and tokens.source == str(root)


def test_a_folder_without_the_layer_count_is_one_line(tmp_path):
    root = write_specforge(tmp_path / "set", make_samples(3))
    with pytest.raises(BadInput, match="--num-layers"):
        prompts_from_dump(root)


def test_a_dump_still_gives_its_own_ids(tmp_path):
    samples = make_samples(5)
    path = write_dump(tmp_path / "d.h5", samples)
    tokens = prompts_from_dump(path, limit=2)
    assert len(tokens.prompts) == 2 and tokens.num_layers == N
