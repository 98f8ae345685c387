"""Bad Model-Optimizer dumps: each is one line, exit 2, the folder untouched (import, compare, audit)."""

from __future__ import annotations

import os

import pytest
import torch

from bad_input_helpers import assert_refused

H = 16


def _good(path, i, length=6):
    torch.save({"input_ids": torch.arange(1, length + 1), "hidden_states": torch.randn(length, H),
                "aux_hidden_states": torch.randn(length, 3 * H), "loss_mask": torch.ones(length, dtype=torch.long),
                "conversation_id": i}, path)


FAULTS = {
    "truncated": lambda p: open(p, "wb").write(b"PK\x03\x04 not a zip"),
    "rows-differ": lambda p: torch.save({"input_ids": torch.arange(1, 7), "hidden_states": torch.randn(5, H),
                                         "aux_hidden_states": torch.randn(5, 3 * H), "conversation_id": 1}, p),
    "aux-not-multiple": lambda p: torch.save({"input_ids": torch.arange(1, 7), "hidden_states": torch.randn(6, H),
                                              "aux_hidden_states": torch.randn(6, 3 * H + 1), "conversation_id": 1}, p),
    "float-ids": lambda p: torch.save({"input_ids": torch.rand(6), "hidden_states": torch.randn(6, H),
                                       "aux_hidden_states": torch.randn(6, 3 * H), "conversation_id": 1}, p),
    "unknown-storage": lambda p: torch.save({"input_ids": torch.arange(1, 7), "hidden_states": torch.randn(6, 5 * H)[:, 2:2 + H],
                                             "aux_hidden_states": torch.randn(6, 3 * H), "conversation_id": 1}, p),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
@pytest.mark.parametrize("which", [0, 1])
def test_a_bad_file_is_one_line(tmp_path, fault, which):
    if fault == "unknown-storage" and which:
        pytest.skip("the first file tells the backend; a later file's storage is not asked")
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(2):
        path = str(folder / f"{i}.pt")
        FAULTS[fault](path) if i == which else _good(path, i)
    out = tmp_path / "out.h5"
    assert_refused(["import", str(folder), "--quiet", "--num-layers", "8", "--layer-ids", "1,3,4", "--out", str(out)],
                   [str(folder)])
    assert not os.path.exists(out)


def test_a_pt_folder_of_other_keys_is_one_line(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    torch.save({"weights": torch.randn(3)}, folder / "model.pt")
    line = assert_refused(["import", str(folder), "--quiet", "--num-layers", "8", "--out", str(tmp_path / "o.h5")],
                          [str(folder)])
    assert "Model-Optimizer" in line, line
