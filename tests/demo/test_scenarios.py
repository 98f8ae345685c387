"""The planted-fault dumps hold what they say, checked on the raw states with numpy/torch."""

import numpy as np
import pytest
import torch

from alignprobe.conventions import eagle3_hf_indices
from alignprobe.dump import open_dump
from alignprobe.demo.scenarios import EXPECTED, NAN_EVERY, SCALE, SCENARIOS, SHIFT_TOKENS, build_scenarios
from alignprobe.errors import BadInput
from scenario_dumps import HIDDEN, NUM_LAYERS, scenario_paths

pytestmark = pytest.mark.slow
ARCHS = ("deepseek_v3", "llama")
N, H = NUM_LAYERS, HIDDEN
AUX = eagle3_hf_indices(N)


def _flat(path, stream):
    with open_dump(path) as d:
        return d.read(stream, 0, d.num_tokens), d.token_ids_flat(), list(d.offsets)


def _hf(train_path, index):
    layers, _, _ = _flat(train_path, "layers")
    return layers[:, index * H : (index + 1) * H]


def _cos(a, b):
    return torch.nn.functional.cosine_similarity(torch.from_numpy(a).double(), torch.from_numpy(b).double(), dim=1).numpy()


@pytest.fixture(scope="module", params=ARCHS)
def paths(request):
    return scenario_paths(request.param)


def test_every_scenario_is_built_with_an_expectation(paths):
    assert set(paths) == {"train", *SCENARIOS}
    assert set(EXPECTED) == set(SCENARIOS)


def test_train_dump_holds_post_norm_final_and_the_aux_concat(paths):
    final, _, _ = _flat(paths["train"], "final")
    prenorm, _, _ = _flat(paths["train"], "final_prenorm")
    aux, _, _ = _flat(paths["train"], "eagle3_aux")
    # The final norm ran: RMS-normalised rows have an RMS near the norm weight's (about 1), pre-norm rows do not.
    assert np.sqrt((final.astype(np.float64) ** 2).mean(1)).mean() == pytest.approx(1.0, abs=0.3)
    assert not np.allclose(final, prenorm)
    np.testing.assert_array_equal(aux, np.concatenate([_hf(paths["train"], i) for i in AUX], axis=1))


def test_clean_serve_is_the_aux_concat_up_to_batching_noise(paths):
    serve, _, _ = _flat(paths["clean"], "hidden_states")
    train, _, _ = _flat(paths["train"], "eagle3_aux")
    assert serve.shape == train.shape
    for j in range(3):
        cos = _cos(serve[:, j * H : (j + 1) * H], train[:, j * H : (j + 1) * H])
        # bf16 batching noise; a MoE routing decision may flip on a near tie for a token or two
        assert cos.mean() > 0.999 and np.percentile(cos, 1) > 0.99


def test_offsets_tap_the_neighbouring_layers(paths):
    for name, shift in (("offset_plus1", 1), ("offset_minus1", -1)):
        serve, _, _ = _flat(paths[name], "hidden_states")
        for j, index in enumerate(AUX):
            s = serve[:, j * H : (j + 1) * H]
            assert _cos(s, _hf(paths["train"], index + shift)).mean() > 0.999
            assert _cos(s, _hf(paths["train"], index)).mean() < 0.999


def test_eagle_not_eagle3_is_the_h_wide_final_state(paths):
    serve, _, _ = _flat(paths["eagle_not_eagle3"], "hidden_states")
    final, _, _ = _flat(paths["train"], "final")
    assert serve.shape[1] == H
    assert _cos(serve, final).mean() > 0.999


def test_token_shift_drops_the_first_tokens(paths):
    _, serve_ids, serve_off = _flat(paths["token_shift"], "hidden_states")
    _, train_ids, train_off = _flat(paths["train"], "eagle3_aux")
    for i in range(len(train_off) - 1):
        t = train_ids[train_off[i] : train_off[i + 1]]
        s = serve_ids[serve_off[i] : serve_off[i + 1]]
        np.testing.assert_array_equal(s, t[SHIFT_TOKENS:])


def test_scale_nan_and_final_norm_faults(paths):
    scaled, _, _ = _flat(paths["scale_50x"], "hidden_states")
    clean, _, _ = _flat(paths["clean"], "hidden_states")
    assert np.linalg.norm(scaled) / np.linalg.norm(clean) == pytest.approx(SCALE, rel=0.01)
    nans, _, _ = _flat(paths["nan_rows"], "hidden_states")
    assert np.isnan(nans).any(1).sum() == len(nans) // NAN_EVERY
    final, _, _ = _flat(paths["final_norm_swap"], "final")
    prenorm, _, _ = _flat(paths["train"], "final_prenorm")
    assert _cos(final, prenorm).mean() > 0.999
    assert np.linalg.norm(final) / np.linalg.norm(prenorm) == pytest.approx(1.0, rel=0.02)


def test_int4_drifts_more_than_batching(paths):
    train, _, _ = _flat(paths["train"], "eagle3_aux")
    clean, _, _ = _flat(paths["clean"], "hidden_states")
    int4, _, _ = _flat(paths["int4"], "hidden_states")
    assert np.linalg.norm(int4 - train) > 5 * np.linalg.norm(clean - train)


def test_unknown_scenario_is_bad_input(tmp_path):
    with pytest.raises(BadInput, match="unknown scenario"):
        build_scenarios(tmp_path, names=["nope"])
