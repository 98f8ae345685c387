"""Findings about the VALUES of correctly mapped slices: scale, drift, drift along positions, health."""

from __future__ import annotations

import math

from alignprobe.compare.diagnoses import finding
from alignprobe.compare.expected_drift import expected_drift
from alignprobe.compare.policy import Policy
from alignprobe.compare.result import Finding, SliceExplanation, SliceMetrics, StreamComparison

EARLY_POSITIONS = (1, 16)  # the baseline of position drift: after the attention-sink token 0


def numeric_findings(
    comparison: StreamComparison,
    slice_ok: list[bool],
    policy: Policy,
    train_provenance: dict,
    serve_provenance: dict,
) -> list[Finding]:
    stream, role = comparison.serve_stream, comparison.role
    slices = comparison.slices
    out = _health_findings(comparison, policy)
    mapped = [m for m, ok in zip(slices, slice_ok) if ok and m.tokens]
    scaled = [m for m in mapped if _scale_off(m, policy)]
    if scaled:
        out.append(
            finding(
                "scale_mismatch",
                "direction agrees but magnitude does not: norm ratio serve/train "
                + ", ".join(f"{m.label} x{m.norm_ratio:.3g}" for m in scaled),
                {
                    "slices": [
                        {"label": m.label, "norm_ratio": m.norm_ratio, "cosine_p50": m.cosine_p50,
                         "rel_rms": m.rel_rms, "rel_rms_if_rescaled_approx": _rel_rms_after_rescale(m)}
                        for m in scaled
                    ],
                    "tolerance": policy.scale_tolerance,
                },
                "A scale applied on one side only: a missing or doubled norm weight, an unscaled embedding "
                "(some models multiply embeddings by sqrt(H)), a residual scaling factor, or a dequantization "
                "scale left out. Find where one side multiplies and the other does not.",
                policy,
                stream=stream,
                role=role,
            )
        )
    drifting = [m for m in mapped if m not in scaled and _drift_level(m, policy)]
    if drifting:
        worst = max(drifting, key=lambda m: m.rel_rms)
        failing = any(_drift_level(m, policy) == "error" for m in drifting)
        expected = expected_drift(train_provenance, serve_provenance)
        evidence = {
            "by_depth": [
                {"label": m.label, "rel_rms": m.rel_rms, "cosine_mean": m.cosine_mean, "cosine_p1": m.cosine_p1,
                 "sqnr_db": m.sqnr_db}
                for m in mapped
            ],
            "worst": worst.label,
            "by_position": [{"start": b.start, "stop": b.stop, "rel_rms": b.rel_rms} for b in worst.positions],
            "tolerance": {
                "warn_rel_rms": policy.drift_warn_rel_rms,
                "fail_rel_rms": policy.drift_fail_rel_rms,
                "warn_cosine_p1": policy.drift_warn_cosine_p1,
                "fail_cosine_p1": policy.drift_fail_cosine_p1,
            },
        }
        note = ""
        fix = ("The mapping is right but the numbers differ: serve and train in different precision or "
               "quantization (e.g. INT4 serving vs BF16 extraction). Capture training states from the served "
               "(quantized) model, or serve in the precision the drafter was trained on.")
        if expected is not None:
            evidence["expected"] = expected
            within = worst.rel_rms <= expected["rel_rms_p95"] * 1.5
            note = (
                f"; {expected['setting']} gives about {expected['rel_rms_median']:.3g} on tiny models, so this is "
                + ("what that setting produces" if within else "MORE than that setting explains")
            )
            if not within and "weights" not in expected["setting"]:  # no weight quantization recorded
                # Both sides' recorded precision explains far less than this, so "another precision" is
                # not the cause to send a team after: on tests/holdout4_cases.py a missing tensor-parallel
                # all-reduce (bf16 both sides, rel-RMS 0.47) and another revision of the weights were
                # numeric_drift with the precision fix. Name the computation first, precision last.
                fix = ("The mapping is right but the numbers differ by more than the recorded precision explains: "
                       "check that both sides run the same computation first (the same checkpoint and revision, "
                       "the same attention: sliding window, RoPE scaling; every tensor-parallel all-reduce), then "
                       "quantization or a precision the provenance does not record. Capture training states from "
                       "the served model to confirm.")
        out.append(
            finding(
                "numeric_drift",
                f"values drift beyond tolerance: worst {worst.label} rel-RMS {worst.rel_rms:.3g}, cosine p1 "
                f"{worst.cosine_p1:.4f}{note}",
                evidence,
                fix,
                policy,
                stream=stream,
                role=role,
                severity="error" if failing else "warn",
            )
        )
    growing = [g for g in (_position_growth(m, policy) for m in mapped) if g]
    if growing:
        worst = max(growing, key=lambda g: g["growth"])
        out.append(
            finding(
                "position_drift",
                f"drift grows along the sequence: {worst['label']} rel-RMS {worst['early_rel_rms']:.3g} at positions "
                f"1-15 -> {worst['late_rel_rms']:.3g} at {worst['late_positions']} (x{worst['growth']:.1f})",
                {"slices": growing, "growth_tolerance": policy.position_growth},
                "Error that grows with position points at attention or the KV cache: a KV cache in lower "
                "precision (fp8 KV), a different RoPE scaling or max position, or a different attention "
                "kernel. Compare the engine's rope_scaling / kv_cache_dtype with training.",
                policy,
                stream=stream,
                role=role,
            )
        )
    return out


def _scale_off(m: SliceMetrics, policy: Policy) -> bool:
    if not (m.cosine_p50 >= policy.scale_min_cosine) or not math.isfinite(m.norm_ratio) or m.norm_ratio <= 0:
        return False
    return abs(math.log(m.norm_ratio)) > math.log1p(policy.scale_tolerance)


def _rel_rms_after_rescale(m: SliceMetrics) -> float:
    """rel-RMS of serve/ratio against train, from cosine: what is left once the scale is divided out."""
    # ||b/r - a||^2 / ||a||^2 with r = ||b||/||a|| summed over rows is ~ 2(1 - cos): report that.
    return math.sqrt(max(0.0, 2.0 * (1.0 - m.cosine_mean)))


def _drift_level(m: SliceMetrics, policy: Policy) -> str | None:
    if m.rel_rms > policy.drift_fail_rel_rms or m.cosine_p1 < policy.drift_fail_cosine_p1:
        return "error"
    if m.rel_rms > policy.drift_warn_rel_rms or m.cosine_p1 < policy.drift_warn_cosine_p1:
        return "warn"
    return None


def _position_growth(m: SliceMetrics, policy: Policy) -> dict | None:
    early = [b for b in m.positions if EARLY_POSITIONS[0] <= b.start < EARLY_POSITIONS[1]]
    min_tokens = max(16, m.tokens // 100)
    late = [b for b in m.positions if b.start >= EARLY_POSITIONS[1] and b.tokens >= min_tokens]
    if not early or not late:
        return None
    early_tokens = sum(b.tokens for b in early)
    early_rms = math.sqrt(sum(b.rel_rms**2 * b.tokens for b in early) / early_tokens)
    last = late[-1]
    if last.rel_rms <= policy.drift_warn_rel_rms:
        return None
    growth = last.rel_rms / early_rms if early_rms > 0 else math.inf
    if growth <= policy.position_growth:
        return None
    return {
        "label": m.label,
        "early_rel_rms": early_rms,
        "late_rel_rms": last.rel_rms,
        "late_positions": f"{last.start}-{last.stop - 1}",
        "growth": growth if math.isfinite(growth) else 1e9,
        "by_position": [{"start": b.start, "stop": b.stop, "tokens": b.tokens, "rel_rms": b.rel_rms} for b in m.positions],
    }


def _health_findings(comparison: StreamComparison, policy: Policy) -> list[Finding]:
    stream, role = comparison.serve_stream, comparison.role
    out = []
    bad = [
        {"label": m.label, "train_nan_rows": m.train_health.nan_rows, "train_inf_rows": m.train_health.inf_rows,
         "serve_nan_rows": m.serve_health.nan_rows, "serve_inf_rows": m.serve_health.inf_rows,
         "rows": m.serve_health.rows}
        for m in comparison.slices
        if m.train_health.nonfinite_rows or m.serve_health.nonfinite_rows
    ]
    if bad:
        sides = [s for s in ("train", "serve") if any(b[f"{s}_nan_rows"] + b[f"{s}_inf_rows"] for b in bad)]
        worst = max(bad, key=lambda b: b["serve_nan_rows"] + b["serve_inf_rows"] + b["train_nan_rows"] + b["train_inf_rows"])
        out.append(
            finding(
                "nonfinite",
                f"NaN/Inf rows on the {' and '.join(sides)} side: {worst['label']} has "
                f"{worst['serve_nan_rows'] + worst['serve_inf_rows']} serve and "
                f"{worst['train_nan_rows'] + worst['train_inf_rows']} train rows not finite (left out of the numbers)",
                {"slices": bad},
                "Non-finite hidden states: fp16 overflow (serve or capture in bf16 instead), an uninitialised "
                "buffer returned for some tokens (padding, a cache hit), or a broken kernel. Look at the rows "
                "listed with alignprobe inspect.",
                policy,
                stream=stream,
                role=role,
            )
        )
    degenerate = [
        {"label": m.label, "train_zero_rows": m.train_health.zero_rows, "train_constant_rows": m.train_health.constant_rows,
         "serve_zero_rows": m.serve_health.zero_rows, "serve_constant_rows": m.serve_health.constant_rows,
         "rows": m.serve_health.rows}
        for m in comparison.slices
        if m.train_health.degenerate_rows or m.serve_health.degenerate_rows
    ]
    if degenerate:
        worst_fraction = max(
            max(d["train_zero_rows"] + d["train_constant_rows"], d["serve_zero_rows"] + d["serve_constant_rows"])
            / max(1, d["rows"])
            for d in degenerate
        )
        out.append(
            finding(
                "degenerate",
                f"all-zero or constant rows in {len(degenerate)} slice(s) (up to {worst_fraction:.1%} of rows)",
                {"slices": degenerate, "worst_fraction": worst_fraction, "fail_fraction": policy.degenerate_fail_fraction},
                "Zero or constant hidden states are not states: padding rows stored as zeros, a capture that "
                "never ran for some tokens, or a slice the engine leaves empty. Strip padding at capture, or "
                "find why those tokens were not captured.",
                policy,
                stream=stream,
                role=role,
                severity="error" if worst_fraction > policy.degenerate_fail_fraction else "warn",
            )
        )
    return out


def flips_only(numeric: list[Finding], explained: list[SliceExplanation], policy: Policy,
               provenances: tuple[dict, ...] = ()) -> None:
    """Lower numeric_drift and position_drift of one stream to info where its error is discrete flips
    (explain/drift.py isolated_outliers): in every slice the tokens off by more than
    drift_fail_rel_rms are few and scattered, and all the other tokens agree within
    drift_warn_rel_rms, at late positions too. That is what a dtype or kernel change does to a MoE
    model (a token whose router's top-k scores cross goes to other experts): named, with the outlier
    tokens counted, and not failing the gate, since the bulk agrees as a clean pair does. A real drift
    (weight quantization) moves the bulk and stays a warning or an error."""
    drifted = [f for f in numeric if f.code in ("numeric_drift", "position_drift") and f.code not in policy.severity]
    if not drifted or not explained:
        return
    if any((p.get("capture") or {}).get("routed_experts") == 0 for p in provenances):
        return  # a capture that knew its model says it routes no token: isolated outliers are not flips there
    flips = []
    for e in explained:
        fit = next((f for f in e.tried if f.name == "drift"), None)
        tokens = fit.params.get("outlier_tokens") if fit is not None else None
        if tokens is None or e.winner.name not in ("identity", "drift"):
            return
        if not all(x is not None and x <= policy.drift_warn_rel_rms for x in (tokens["bulk_rel_rms"], tokens["bulk_late_rel_rms"])):
            return
        if tokens["rows"] and not tokens["flips"]:
            return
        if tokens["rows"]:
            flips.append({"label": e.label, **tokens})
    if not flips:
        return
    worst = max(flips, key=lambda t: t["fraction"])
    lead = (f"discrete flips, not drift of the states: {worst['rows']} of {worst['of_rows']} sampled tokens "
            f"({worst['fraction']:.1%}) of {worst['label']} are off by rel-RMS {worst['outlier_rel_rms'] or 0:.2g}, scattered, "
            f"and every other token agrees within {worst['bulk_rel_rms']:.2g} (a MoE router sending a token to other "
            "experts under another dtype or kernel); over all tokens: ")
    for f in drifted:
        f.severity = "info"
        f.title = lead + f.title
        f.evidence["discrete_flips"] = flips
        f.fix = ("Expected when the two sides run in different dtypes or kernels on a MoE model: serve in the dtype "
                 "the drafter was trained on to remove the flips; the rest of the states agree. " + f.fix)
