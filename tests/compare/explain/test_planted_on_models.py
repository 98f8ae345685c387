"""Every explanation of compare/explain/, planted on both tiny architectures (briefly trained), is
named right with its fitted parameters; the clean pairs pass with nothing above info; the
real-world pairs (speculators vs capture hf, SpecForge ids served by vLLM, swapped dumps, the same
dump) give the right verdict and name. Expected values come from how each plant was built
(tests/helpers/explain_dumps.py), never from the comparer."""

import numpy as np
import pytest

from diagnosis_helpers import winners
from explain_dumps import AUX, DEPTH_DRIFT, N, SCALE, SHIFT, SPECFORGE_AUX, VLLM_READS, planted, result

pytestmark = pytest.mark.slow
ARCHS = ("deepseek_v3", "llama")


def held_out_ok(e):
    return e.winner.held_out_rows > 0 and e.winner.held_out_rel_rms <= 0.07


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", ["clean", "float16", "speculators"])
def test_clean_pairs_pass_with_nothing_above_info(arch, name):
    r = result(arch, name)
    assert r.verdict == "PASS" and r.codes("warn") == [], r.codes()
    assert set(winners(r)) == {"identity"} and all(held_out_ok(e) for e in r.explanations)
    assert all(e.runner_up is not None for e in r.explanations)
    if name == "float16":
        assert r.finding("dtype_mismatch").severity == "info"
    if name == "speculators":  # the pre-norm final paired with capture hf's pre-norm final, no warning
        final = next(s for s in r.streams if s.serve_stream == "final")
        assert final.train_stream == "final_prenorm"


@pytest.mark.parametrize("arch", ARCHS)
def test_index_offset_names_the_shift(arch):
    r = result(arch, "offset_minus1")
    assert winners(r) == ["index_offset"] * 3
    assert [e.winner.params["offset"] for e in r.explanations] == [-1] * 3
    assert [e.winner.params["measured_hf_index"] for e in r.explanations] == [i - 1 for i in AUX]
    f = r.finding("layer_offset")
    assert f.evidence["shift"] == -1 and "vLLM" in f.fix and "SGLang" not in f.fix  # a vLLM capture


@pytest.mark.parametrize("arch", ARCHS)
def test_specforge_ids_served_by_vllm_are_a_minus_one_offset_with_three_train_layers(arch):
    r = result(arch, "vllm_ids", "train3")
    assert r.codes("warn") == ["layer_offset"], r.codes()
    f = r.finding("layer_offset")
    assert f.evidence["shift"] == -1 and f.evidence["measured"] == [f"HF[{i}]" for i in VLLM_READS]
    assert f.evidence["expected"] == [f"HF[{i}]" for i in SPECFORGE_AUX]
    assert "claims" in f.evidence["basis"] and "measured" in f.evidence["basis"]
    assert "vLLM" in f.fix and "SGLang" not in f.fix and "[2, 4, 5]" in f.fix


@pytest.mark.parametrize("arch", ARCHS)
def test_duplicate_and_missing_taps(arch):
    r = result(arch, "duplicate_tap")
    assert winners(r) == ["identity", "identity", "duplicate_tap"]
    e = r.explanations[2]
    assert e.winner.params["repeats_serve_slice"] == 1 and e.winner.params["missing"] == f"HF[{AUX[2]}]"
    assert r.codes("warn") == ["duplicate_tap"]
    f = result(arch, "missing_tap").finding("width_mismatch")
    assert f.evidence["missing"] == [f"HF[{AUX[2]}]"] and "missing tap" in f.title


@pytest.mark.parametrize("arch", ARCHS)
def test_row_shift_inside_a_sample(arch):
    r = result(arch, "row_shift")
    assert winners(r) == ["row_shift"] * 3 and r.codes("warn") == ["row_shift"]
    assert {e.winner.params["shift"] for e in r.explanations} == {SHIFT}
    assert all(held_out_ok(e) for e in r.explanations)


@pytest.mark.parametrize("arch", ARCHS)
def test_rows_from_the_previous_request_and_padding_rows(arch):
    r = result(arch, "foreign_previous")
    assert winners(r) == ["foreign_rows"] * 3 and r.codes("warn") == ["foreign_rows"]
    p = r.explanations[0].winner.params
    assert p["pattern"] == "the previous request" and p["samples_moved"] == p["samples"] - 1
    r = result(arch, "padding_rows")
    assert winners(r) == ["foreign_rows"] * 3
    assert all(e.winner.params["padding_rows"] > 0 and not e.winner.params["sources"] for e in r.explanations)


@pytest.mark.parametrize("arch", ARCHS)
def test_scalar_and_channel_scale_with_the_factor(arch):
    r = result(arch, "scalar_scale")
    assert winners(r) == ["scalar_scale"] * 3
    assert [e.winner.params["factor"] for e in r.explanations] == pytest.approx([SCALE] * 3, rel=0.01)
    assert {e.winner.params["known_as"] for e in r.explanations} == {"sqrt(H)"}
    assert r.codes("warn") == ["scale_mismatch"] and r.finding("numeric_drift") is None
    r = result(arch, "channel_scale")
    assert winners(r) == ["channel_scale"] * 3 and r.codes("warn") == ["channel_scale"]
    from explain_dumps import WEIGHT
    p = r.explanations[0].winner.params
    assert p["weight_min"] == pytest.approx(WEIGHT.min(), rel=0.05) and p["weight_max"] == pytest.approx(WEIGHT.max(), rel=0.05)


@pytest.mark.parametrize("arch", ARCHS)
def test_rotation_fitted_on_held_out_rows_on_all_or_some_slices(arch):
    r = result(arch, "rotation")
    assert winners(r) == ["rotation"] * 3 and r.codes("warn") == ["rotated"]
    assert all(held_out_ok(e) and e.winner.params["distance_from_identity"] > 0.5 for e in r.explanations)
    r = result(arch, "rotation_last")
    assert winners(r) == ["identity", "identity", "rotation"]


@pytest.mark.parametrize("arch", ARCHS)
def test_residual_split(arch):
    r = result(arch, "residual_split")
    assert winners(r) == ["identity", "residual_split", "identity"]
    p = r.explanations[1].winner.params
    assert (p["hf_index"], p["minus_hf_index"]) == (AUX[1], AUX[1] - 1) and r.codes("warn") == ["residual_split"]


@pytest.mark.parametrize("arch", ARCHS)
def test_drift_signatures(arch):
    r = result(arch, "position_drift")
    assert set(winners(r)) == {"drift"}
    assert all("position-dependent" in e.winner.params["signature"] for e in r.explanations)
    assert "position-dependent" in r.finding("numeric_drift").evidence["signature"]
    r = result(arch, "depth_drift")
    assert winners(r)[0] == "identity" and winners(r)[1:] == ["drift", "drift"]  # 0.03 is within the noise allowed
    assert "grows with depth" in r.finding("numeric_drift").evidence["signature"]
    depth = [d["rel_rms"] for d in r.explanations[2].winner.params["by_depth"]]
    assert depth == pytest.approx(list(DEPTH_DRIFT), abs=0.02)
    r = result(arch, "int4")  # real INT4 weights: the same HF index, within drift
    assert set(winners(r)) <= {"identity", "drift"} and r.finding("numeric_drift") is not None


@pytest.mark.parametrize("arch", ARCHS)
def test_another_model_is_nothing_fits_with_the_closest_tries(arch):
    r = result(arch, "nothing_fits")
    assert set(winners(r)) == {"nothing_fits"} and r.codes("warn") == ["unexplained"]
    closest = r.explanations[0].winner.params["closest"]
    assert closest and all(c["held_out_rel_rms"] > 0.07 for c in closest)


@pytest.mark.parametrize("arch", ARCHS)
def test_same_dump_swapped_dumps_and_nan_rows(arch):
    from alignprobe.compare import compare

    p = planted(arch)
    for serve in (p["train"], p["train_copy"]):
        r = compare(p["train"], serve)
        assert r.verdict == "FAIL" and r.codes("error") == ["same_dump"], r.codes()
    r = compare(p["clean"], p["train"])  # the vLLM capture passed as training, the extraction as serving
    f = r.finding("dumps_swapped")
    assert f is not None and f.severity == "error" and "swapped" in f.title
    r = result(arch, "nan_rows")
    nan = r.finding("nonfinite")
    where = nan.evidence["locations"]  # over every row of the pass: the planted flat rows, each one
    from alignprobe.demo.scenarios import NAN_EVERY
    from alignprobe.dump import open_dump

    with open_dump(r.serve_path) as serve:
        planted_rows = serve.num_tokens // NAN_EVERY
        assert nan.evidence["nonfinite_rows_total"] == planted_rows
        assert len(where) == min(20, planted_rows)
        for w in where:
            assert (serve.span(w["sample_id"])[0] + w["position"]) % NAN_EVERY == NAN_EVERY - 1
            assert w["side"] == "serve" and w["value"] == "NaN" and len(w["slices"]) == 3


@pytest.mark.parametrize("arch", ARCHS)
def test_explanations_survive_the_json_round_trip(arch):
    from alignprobe.compare.result import CompareResult

    r = result(arch, "rotation_last")
    back = CompareResult.from_json(r.to_json())
    assert [e.winner.name for e in back.explanations] == winners(r)
    assert back.explanations[2].winner.params["distance_from_identity"] == pytest.approx(
        r.explanations[2].winner.params["distance_from_identity"])
    assert back.explanations[2].runner_up.name == r.explanations[2].runner_up.name
    assert np.isclose(back.explanations[2].winner.held_out_rel_rms, r.explanations[2].winner.held_out_rel_rms)
