"""compare/diagnoses/layout.py: the width findings, measured (the final state served for the aux concat) and
made where nothing could be measured; its tap and norm findings are pinned in tests/compare/test_mapping.py."""

from alignprobe.compare import compare
from compare_helpers import H, N, make_samples, write_serve, write_train


def test_a_serve_stream_of_the_wrong_width_with_no_aligned_rows_is_still_named(tmp_path):
    train = write_train(tmp_path / "t.h5", make_samples(num=3, length=20))
    other_prompts = make_samples(num=3, length=20, seed=5)  # the same sample ids, other token ids
    serve = write_serve(tmp_path / "s.h5", other_prompts, taps=(3, 4))
    r = compare(train, serve)
    assert r.finding("no_aligned_tokens") is not None
    f = r.finding("width_mismatch")
    assert f.severity == "error" and f.subject.stream == "hidden_states"
    assert f.evidence["serve_width"] == 2 * H and f.evidence["expected_width"] == 3 * H
    assert "no aligned rows" in f.title


def test_the_final_state_served_for_the_aux_concat_is_eagle3_aux_capture_off(tmp_path):
    samples = make_samples(num=3, length=20)
    train = write_train(tmp_path / "t.h5", samples)
    serve = write_serve(tmp_path / "s.h5", samples, taps=(N,))  # EAGLE, not EAGLE3: the final state alone
    f = compare(train, serve).finding("width_mismatch")
    assert f.severity == "error" and "EAGLE3 aux capture is off" in f.title
    assert (f.evidence["serve_width"], f.evidence["expected_width"]) == (H, 3 * H)
