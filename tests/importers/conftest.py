"""The importer tests' shared tiny model, prompts, HF capture and foreign folders, built once a test module
(a test may change the model)."""

from __future__ import annotations

import pytest
import torch

from alignprobe.probes.hf import capture_hf
from alignprobe.probes.prompts import prompts_from_token_lists
from alignprobe.demo.tiny_models import tiny_llama

from importer_folders import N, write_specforge, write_speculators


@pytest.fixture(scope="module")
def model():
    return tiny_llama(num_layers=N)


@pytest.fixture(scope="module")
def token_lists():
    g = torch.Generator().manual_seed(11)
    lists = [torch.randint(1, 500, (int(n),), generator=g).tolist() for n in torch.randint(3, 20, (9,), generator=g)]
    lists[3][-1] = 0  # a real token 0 at the end, which looks like SpecForge padding
    return lists


@pytest.fixture(scope="module")
def hf_dump(model, token_lists, tmp_path_factory):
    out = tmp_path_factory.mktemp("hf") / "train.h5"
    return capture_hf(model, prompts_from_token_lists(token_lists), out, batch_size=4, progress=False)


@pytest.fixture(scope="module")
def specforge_dir(model, token_lists, tmp_path_factory):
    return write_specforge(tmp_path_factory.mktemp("specforge") / "hidden_states", model, token_lists)


@pytest.fixture(scope="module")
def speculators_dir(model, token_lists, tmp_path_factory):
    return write_speculators(tmp_path_factory.mktemp("speculators") / "hidden_states", model, token_lists)
