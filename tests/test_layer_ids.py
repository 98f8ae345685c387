"""One precedence for a drafter config's layer ids, one parser of a layer list (alignprobe/layer_ids.py)."""

import json

import pytest

from alignprobe.errors import BadInput
from alignprobe.layer_ids import layer_ids_from_config, layer_ids_in_config, parse_ids, parse_layer_list

BOTH = {"eagle_aux_hidden_state_layer_ids": [2, 4, 5], "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 3, 4]}}


def test_top_level_key_wins_as_in_vllm(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(BOTH))
    assert layer_ids_from_config(path) == ([2, 4, 5], "eagle_aux_hidden_state_layer_ids")
    assert layer_ids_in_config(BOTH, "x") == ([2, 4, 5], "eagle_aux_hidden_state_layer_ids")
    assert layer_ids_in_config({"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 3, 4]}}, "x") == \
        ([1, 3, 4], "eagle_config.eagle_aux_hidden_state_layer_ids")
    assert layer_ids_in_config({}, "x") == (None, "")


def test_accept_reads_the_same_precedence():
    from alignprobe.accept import checkpoint

    assert checkpoint.layer_ids_in_config is layer_ids_in_config  # the loader asks the one source


@pytest.mark.parametrize("value", [[1, "2"], "1,2", [True, 2], 3])
def test_a_value_that_is_not_a_list_of_integers_is_one_line(value):
    with pytest.raises(BadInput, match="expected a list of integer layer ids"):
        layer_ids_in_config({"eagle_aux_hidden_state_layer_ids": value}, "cfg")


def test_import_refuses_negative_or_empty_ids_from_a_config(tmp_path):
    for ids in ([], [-1, 2]):
        path = tmp_path / "config.json"
        path.write_text(json.dumps({"eagle_config": {"eagle_aux_hidden_state_layer_ids": ids}}))
        with pytest.raises(BadInput, match="non-negative layer ids"):
            layer_ids_from_config(path)


def test_one_parser_for_words_lists_and_ids():
    assert parse_layer_list(None, "--layers") is None
    assert parse_layer_list([2, 30], "x") == [2, 30]
    assert parse_layer_list(" EAGLE3 ", "--layers") == "eagle3"
    assert parse_layer_list("2, 30,58,", "--layers") == [2, 30, 58]
    assert parse_layer_list("", "--layer-ids", words=()) == []
    with pytest.raises(BadInput, match="give all, eagle3 or comma-separated HF indices"):
        parse_layer_list("2,x", "--layers")
    with pytest.raises(BadInput, match="--layer-ids 'all': give comma-separated integers"):
        parse_layer_list("all", "--layer-ids", words=())
    assert parse_ids("1,29,57") == [1, 29, 57]
    with pytest.raises(BadInput, match="is empty"):
        parse_ids(" , ")


def test_dflash_target_layer_ids_are_layer_outputs_plus_one_as_vllm_reads_them():
    """A DFlash drafter's five ids k are outputs of layer k (HF[k+1]); vLLM adds 1 and taps HF[k+1]."""
    from alignprobe.conventions import map_layer_ids

    dflash = {"dflash_config": {"target_layer_ids": [1, 9, 17, 25, 33], "mask_token_id": 7}}
    ids, where = layer_ids_in_config(dflash, "x")
    assert ids == [2, 10, 18, 26, 34] and where.startswith("dflash_config.target_layer_ids (layer outputs: +1")
    assert map_layer_ids("vllm", ids, 36).hf_indices == (2, 10, 18, 26, 34)
    assert layer_ids_in_config({"target_layer_ids": [0, 3]}, "x")[0] == [1, 4]
    # the top-level eagle key still wins, as in get_eagle3_aux_layers_from_config
    assert layer_ids_in_config({**dflash, "eagle_aux_hidden_state_layer_ids": [3, 5]}, "x")[0] == [3, 5]
    with pytest.raises(BadInput, match="dflash_config.target_layer_ids is"):
        layer_ids_in_config({"dflash_config": {"target_layer_ids": "1,9"}}, "x")
