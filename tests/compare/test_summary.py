"""The terminal summary: one screen, findings by severity, the worst layer always shown."""

import numpy as np

from alignprobe.compare import compare
import alignprobe.compare.summary as summary
from alignprobe.compare.summary import format_summary
from alignprobe.dump import StreamClaim
from compare_helpers import H, N, make_samples, write_dump, write_train


def test_a_long_layer_stack_is_cut_to_a_screen_keeping_the_worst(tmp_path, monkeypatch):
    monkeypatch.setattr(summary, "MAX_ROWS", 4)
    samples = make_samples(num=3, length=20)
    train = write_train(tmp_path / "t.h5", samples)
    g = np.random.default_rng(0)
    claim = StreamClaim(range(N + 1), H, N, "float32", "post", "layers")

    def states(hf, pre, sid):
        x = hf.copy()
        x[:, 3] += 0.5 * g.standard_normal(x[:, 3].shape).astype(np.float32)  # HF[3] drifts
        return {"layers": x.reshape(len(x), -1)}

    r = compare(train, write_dump(tmp_path / "s.h5", samples, {"layers": claim}, states), {"mapping_min_cosine": 0.5})
    text = format_summary(r)
    rows = [line for line in text.splitlines() if line.startswith("  HF[")]
    assert len(rows) <= 4 and f"{len(rows)} of {N + 1} slices shown" in text
    assert any(line.startswith("  HF[3] ") for line in rows)
    assert text.splitlines()[0] == f"alignprobe compare: {r.verdict}"
    severities = [line.split()[0] for line in text.splitlines() if line[:5] in ("ERROR", "WARN ", "info ")]
    order = {"ERROR": 0, "WARN": 1, "info": 2}
    assert severities == sorted(severities, key=order.get)


def test_verbose_evidence_is_labelled_numbers_never_cut(tmp_path):
    samples = make_samples(num=3, length=20)
    train = write_train(tmp_path / "t.h5", samples)
    claim = StreamClaim(range(N + 1), H, N, "float32", "post", "layers")
    g = np.random.default_rng(1)

    def states(hf, pre, sid):
        x = hf.copy()
        x[:, 3] += 0.5 * g.standard_normal(x[:, 3].shape).astype(np.float32)
        return {"layers": x.reshape(len(x), -1)}

    r = compare(train, write_dump(tmp_path / "s.h5", samples, {"layers": claim}, states), {"mapping_min_cosine": 0.5})
    text = format_summary(r, verbose=True)
    assert "evidence:" in text and "..." not in text
    assert not any(len(d) > 8 for d in __import__("re").findall(r"\d+\.(\d+)", text))  # 4 significant digits, not 16


def test_a_runner_up_with_a_lower_error_says_why_it_lost():
    from alignprobe.compare.result import ExplanationFit

    winner = ExplanationFit("identity", 0, True, 0.02, 0.99, 0.02, 100)
    better = ExplanationFit("channel_scale", 3, True, 0.015, 0.99, 0.01, 100)
    assert "more complex" in summary.runner_up_lost(winner, better)
    assert summary.runner_up_lost(better, winner) == ""
