"""Hand-built CompareResults for the reporter's tests: known contents, no comparison needed.

They look like what the comparer returns for a +1 layer offset (FAIL) and for an H-wide serve
vector against a 3H training concat, with numbers chosen here, so a test knows what the page must show.
"""

from __future__ import annotations

from alignprobe.findings import Subject
from alignprobe.compare.result import (
    Candidate,
    CompareResult,
    Finding,
    MappingSearch,
    PositionBucket,
    RowHealth,
    SliceMatch,
    SliceMetrics,
    StreamComparison,
    TokenCheck,
    TokenIssue,
)

N, H = 6, 64
AUX = (2, 3, 3)  # eagle3_hf_indices(6)
CANDIDATE_INDICES = list(range(N + 1))


def _candidates() -> list[Candidate]:
    return [Candidate("layers", i, i, "post", f"HF[{i}]") for i in CANDIDATE_INDICES]


def _cosine_rows(best: list[int]) -> list[list[float]]:
    """One row per serve slice: 0.99 at its best candidate, falling off with HF distance."""
    return [[0.99 if c == b else round(0.9 - 0.1 * abs(c - b), 3) for c in CANDIDATE_INDICES] for b in best]


def _slice(label: str, j: int, hf: int, cos: float) -> SliceMetrics:
    return SliceMetrics(
        label=label, train_stream="eagle3_aux", train_slice=j, train_hf_index=hf,
        serve_stream="hidden_states", serve_slice=j, serve_hf_index=hf, tokens=256,
        cosine_mean=cos, cosine_p1=cos - 0.05, cosine_p5=cos - 0.02, cosine_p50=cos, cosine_min=cos - 0.1,
        rel_rms=0.1 * (1 + j), sqnr_db=20.0, norm_ratio=1.02, max_abs_diff=0.5,
        train_health=RowHealth(rows=256), serve_health=RowHealth(rows=256, nan_rows=1),
        positions=[PositionBucket(0, 1, 8, cos, 0.05, 1.0), PositionBucket(1, 2, 8, cos, 0.07, 1.0),
                   PositionBucket(2, 4, 16, cos, 0.09, 1.0)],
    )


def offset_result() -> CompareResult:
    """Serve slices are HF[3], HF[4], HF[4] where training used HF[2], HF[3], HF[3]."""
    best = [3, 4, 4]
    matches = [SliceMatch(j, b, f"HF[{b}]", 0.99, b - 1, f"HF[{b - 1}]", 0.9, 0.09) for j, b in enumerate(best)]
    search = MappingSearch(
        serve_stream="hidden_states", role="drafter_input", serve_labels=["HF[2]", "HF[3]", "HF[3]"],
        candidates=_candidates(), cosine=_cosine_rows(best), norm_ratio=[[1.0] * len(CANDIDATE_INDICES)] * 3,
        matches=matches, expected=["HF[2]", "HF[3]", "HF[3]"], claimed=["HF[2]", "HF[3]", "HF[3]"],
        tokens_sampled=256, sampling="every token",
    )
    pair = StreamComparison(
        role="drafter_input", train_stream="eagle3_aux", serve_stream="hidden_states",
        train_claim={"hf_indices": list(AUX), "hidden_size": H, "num_layers": N, "final_norm": "post"},
        serve_claim={"hf_indices": list(AUX), "hidden_size": H, "num_layers": N, "final_norm": "post"},
        slices=[_slice(f"HF[{hf}]", j, hf, 0.8) for j, hf in enumerate(AUX)], mapping_ok=False,
    )
    findings = [
        Finding("layer_offset", "error", "serve slices are HF[k+1] of what training used <script>alert(1)</script>",
                {"shift": 1, "margin": 0.09, "measured": ["HF[3]", "HF[4]", "HF[4]"]},
                "Configure the engine's layer ids one lower (SGLang adds +1 to explicit ids).", subject=Subject("hidden_states")),
        Finding("position_drift", "warn", "error grows along the sequence", {"growth": 1.8}, "Check the KV cache dtype.",
                subject=Subject("hidden_states")),
        Finding("token_shift", "info", "1 sample is shifted by one token", {"samples": 1}, ""),
    ]
    return CompareResult(
        verdict="FAIL", findings=findings,
        tokens=TokenCheck(paired=4, identical=3, compared_samples=4, aligned_tokens=256,
                          issues=[TokenIssue("s-3", "shift", 64, 63, 63, shift=1)]),
        streams=[pair], mappings=[search], hidden_size=H, num_layers=N,
        train_path="/nowhere/train.h5", serve_path="/nowhere/serve.h5",
        train_provenance={"engine": "transformers"}, serve_provenance={"engine": "sglang", "quantization": ""},
        policy={"drift_warn_cosine_p1": 0.998, "drift_warn_rel_rms": 0.05}, options={"sample": None}, notes=["a note"], elapsed_s=1.5,
    )


def width_result() -> CompareResult:
    """An H-wide serve vector (measured as HF[6]) against the 3H training concat."""
    search = MappingSearch(
        serve_stream="hidden_states", role="drafter_input", serve_labels=["HF[6]"],
        candidates=_candidates(), cosine=_cosine_rows([6]), norm_ratio=[[1.0] * len(CANDIDATE_INDICES)],
        matches=[SliceMatch(0, 6, "HF[6]", 0.99, 5, "HF[5]", 0.9, 0.09)], expected=["HF[2]", "HF[3]", "HF[3]"],
        claimed=["HF[6]"],
        tokens_sampled=128, sampling="every token",
    )
    pair = StreamComparison(
        role="drafter_input", train_stream="eagle3_aux", serve_stream="hidden_states",
        train_claim={"hf_indices": list(AUX), "hidden_size": H, "num_layers": N, "final_norm": "post"},
        serve_claim={"hf_indices": [N], "hidden_size": H, "num_layers": N, "final_norm": "post"},
        slices=[], mapping_ok=False,
    )  # the comparer lists no stream pair when the widths differ; kept here to test the empty table
    finding = Finding("width_mismatch", "error", "serve is H wide, training used 3H",
                      {"serve_width": H, "train_width": 3 * H, "measured": ["HF[6]"]},
                      "Run the engine with --speculative-algorithm EAGLE3.", subject=Subject("hidden_states"))
    return CompareResult(
        verdict="FAIL", findings=[finding], tokens=TokenCheck(paired=2, identical=2, compared_samples=2, aligned_tokens=128),
        streams=[pair], mappings=[search], hidden_size=H, num_layers=N,
        train_path="/nowhere/train.h5", serve_path="/nowhere/serve.h5",
    )
