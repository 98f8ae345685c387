"""End to end (issue 11): a speculators dataset written by the FP8 backend (F8_E4M3 states with their
per-token scales), read in place and compared with capture hf of the same prompts, is named as the
right layers (identity, or identity with numeric drift), never as a wrong cause."""

import pytest

from importer_folders import VLLM_IDS, write_speculators_fp8

pytestmark = pytest.mark.slow


def test_fp8_speculators_dataset_compares_as_the_right_layers(model, token_lists, hf_dump, tmp_path):
    from alignprobe.compare import compare

    root = write_speculators_fp8(tmp_path / "fp8", model, token_lists)
    r = compare(hf_dump, root, serve_import={"layer_ids": VLLM_IDS})
    assert r.verdict in ("PASS", "WARN") and set(r.codes("warn")) <= {"numeric_drift"}, r.codes()
    assert r.explanations and {e.winner.name for e in r.explanations} <= {"identity", "drift"}
    final = next(s for s in r.streams if s.role == "final")
    assert final.train_stream == "final_prenorm"  # the pre-norm final paired with the one it is
