"""Each planted fault raises its finding; the clean pair passes. Expectations come from how each
scenario was built (alignprobe.demo.scenarios) and from the raw dumps, never from the comparer."""

import numpy as np
import pytest
import torch

from alignprobe.conventions import eagle3_hf_indices
from alignprobe.dump import open_dump
from alignprobe.demo.scenarios import SCALE, SCENARIOS, SHIFT_TOKENS
from scenario_dumps import NUM_LAYERS, scenario_paths, scenario_result

pytestmark = pytest.mark.slow
ARCHS = ("deepseek_v3", "llama")
N = NUM_LAYERS
AUX = eagle3_hf_indices(N)
AUX_LABELS = [f"HF[{i}]" for i in AUX]

# What each planted fault must raise, written from the scenario definitions, with its severity.
MUST_RAISE = {
    "eagle_not_eagle3": ("width_mismatch", "error"),
    "offset_plus1": ("layer_offset", "error"),
    "offset_minus1": ("layer_offset", "error"),
    "wrong_taps": ("wrong_taps", "error"),
    "token_shift": ("token_shift", "warn"),
    "scale_50x": ("scale_mismatch", "error"),
    "int4": ("numeric_drift", None),  # warn or error: the size is the policy's call
    "nan_rows": ("nonfinite", "error"),
}


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", [n for n in SCENARIOS if n not in ("clean", "final_norm_swap")])
def test_planted_fault_raises_its_code(arch, name):
    result = scenario_result(arch, name)
    code, severity = MUST_RAISE[name]
    found = result.finding(code)
    assert found is not None, f"{name}: expected {code}, got {result.codes()}"
    if severity:
        assert found.severity == severity
    else:
        assert found.severity in ("warn", "error")
    assert result.verdict in ("WARN", "FAIL") and found.fix


@pytest.mark.parametrize("arch", ARCHS)
def test_clean_pair_passes_with_nothing_above_info(arch):
    result = scenario_result(arch, "clean")
    assert result.verdict == "PASS" and bool(result)
    assert result.codes("warn") == []
    assert result.mappings[0].measured == AUX_LABELS


@pytest.mark.parametrize("arch", ARCHS)
def test_clean_metrics_equal_an_independent_computation(arch):
    paths = scenario_paths(arch)
    with open_dump(paths["train"]) as t, open_dump(paths["clean"]) as s:
        a = torch.from_numpy(t.read("eagle3_aux", 0, t.num_tokens)).double()
        b = torch.from_numpy(s.read("hidden_states", 0, s.num_tokens)).double()
    result = scenario_result(arch, "clean")
    h = a.shape[1] // 3
    for j, m in enumerate(result.streams[0].slices):
        aj, bj = a[:, j * h : (j + 1) * h], b[:, j * h : (j + 1) * h]
        cos = torch.nn.functional.cosine_similarity(aj, bj, dim=1)
        assert m.label == AUX_LABELS[j]
        assert m.tokens == len(aj)
        assert m.cosine_mean == pytest.approx(cos.mean().item(), abs=1e-7)
        assert m.rel_rms == pytest.approx((torch.linalg.norm(bj - aj) / torch.linalg.norm(aj)).item(), rel=1e-6)


@pytest.mark.parametrize("arch", ARCHS)
def test_offsets_name_the_shift_and_a_convention(arch):
    for name, shift in (("offset_plus1", 1), ("offset_minus1", -1)):
        f = scenario_result(arch, name).finding("layer_offset")
        assert f.evidence["shift"] == shift
        assert f.evidence["measured"] == [f"HF[{i + shift}]" for i in AUX]
        assert f.evidence["conventions"], "a known convention pair explains a one-layer shift"
        assert min(f.evidence["margins"]) > 0
    # offset_minus1 claims the training indices: the comparer measured instead of trusting the claim
    assert scenario_result(arch, "offset_minus1").mappings[0].claimed == AUX_LABELS


@pytest.mark.parametrize("arch", ARCHS)
def test_eagle_instead_of_eagle3_says_which_state_and_the_flag(arch):
    f = scenario_result(arch, "eagle_not_eagle3").finding("width_mismatch")
    assert f.evidence["slices"][0]["measured"] == f"HF[{N}]"
    assert f.evidence["serve_width"] * 3 == f.evidence["expected_width"]
    assert "--speculative-algorithm EAGLE3" in f.fix


@pytest.mark.parametrize("arch", ARCHS)
def test_wrong_taps_and_final_norm_details(arch):
    f = scenario_result(arch, "wrong_taps").finding("wrong_taps")
    assert f.evidence["measured"] == [f"HF[{i}]" for i in (1, N // 2, N - 2)]
    assert len(set(f.evidence["deltas"])) > 1
    # the vLLM layout (aux + the PRE-norm final) against capture hf, which holds both finals: the serve
    # final is paired with the train state it claims and equals, so a correct setup passes (issue 11)
    r = scenario_result(arch, "final_norm_swap")
    assert r.mappings[[m.serve_stream for m in r.mappings].index("final")].measured == [f"HF[{N}] pre-norm"]
    final = next(s for s in r.streams if s.serve_stream == "final")
    assert final.train_stream == "final_prenorm" and final.mapping_ok
    assert r.verdict == "PASS" and r.codes("warn") == []


@pytest.mark.parametrize("arch", ARCHS)
def test_scale_token_shift_and_nan_evidence(arch):
    paths = scenario_paths(arch)
    f = scenario_result(arch, "scale_50x").finding("scale_mismatch")
    assert [s["norm_ratio"] for s in f.evidence["slices"]] == pytest.approx([SCALE] * 3, rel=0.02)
    assert scenario_result(arch, "scale_50x").finding("numeric_drift") is None  # the scale explains it
    r = scenario_result(arch, "token_shift")
    with open_dump(paths["train"]) as d:
        samples = d.num_samples
    assert r.finding("token_shift").evidence["shifts"] == {str(SHIFT_TOKENS): samples}
    assert r.finding("numeric_drift") is None  # aligned by the shift, the states agree
    with open_dump(paths["nan_rows"]) as d:
        nan_rows = int(np.isnan(d.read("hidden_states", 0, d.num_tokens)).any(1).sum())
    f = scenario_result(arch, "nan_rows").finding("nonfinite")
    assert {s["serve_nan_rows"] for s in f.evidence["slices"]} == {nan_rows}


@pytest.mark.parametrize("arch", ARCHS)
def test_int4_drift_evidence_by_depth_and_position(arch):
    f = scenario_result(arch, "int4").finding("numeric_drift")
    depth = f.evidence["by_depth"]
    assert [d["label"] for d in depth] == AUX_LABELS
    clean = scenario_result(arch, "clean").streams[0].slices
    # INT4 weights drift well past batching noise at every depth
    assert all(d["rel_rms"] > 5 * c.rel_rms for d, c in zip(depth, clean))
    assert sum(b["tokens"] if "tokens" in b else 1 for b in f.evidence["by_position"]) > 0
