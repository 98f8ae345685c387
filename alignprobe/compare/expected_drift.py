"""The drift a precision or quantization setting produces, as measured on the tiny trained models.

Measured by benchmarks/measure_tolerances.py (docs/policy.md shows the runs). A numeric_drift
finding quotes the row that matches the two dumps' provenance, so a reader can tell "INT4 does
this" from "something else is wrong too". Tiny models drift less than 61-layer ones: treat the
figures as the order of magnitude, not a prediction.
"""

from __future__ import annotations

# setting -> rel-RMS of serve against train over every layer HF[1..N] of 2 architectures x 5 seeds
# (80 slices a setting), as benchmarks/results/tolerances.json records them.
MEASURED: dict[str, dict[str, float]] = {
    "bfloat16, other batch size": {"rel_rms_median": 0.0004, "rel_rms_p95": 0.0009, "rel_rms_max": 0.0027},
    "bfloat16, batch size 8": {"rel_rms_median": 0.0002, "rel_rms_p95": 0.0006, "rel_rms_max": 0.0026},
    "float16 vs bfloat16": {"rel_rms_median": 0.0074, "rel_rms_p95": 0.0343, "rel_rms_max": 0.0396},
    "float32 vs bfloat16": {"rel_rms_median": 0.0074, "rel_rms_p95": 0.0336, "rel_rms_max": 0.0405},
    "int8 weights": {"rel_rms_median": 0.0094, "rel_rms_p95": 0.0377, "rel_rms_max": 0.0468},
    "fp8 weights": {"rel_rms_median": 0.0238, "rel_rms_p95": 0.0594, "rel_rms_max": 0.0641},
    "int4 weights": {"rel_rms_median": 0.0917, "rel_rms_p95": 0.1224, "rel_rms_max": 0.1357},
}


def setting_of(train_provenance: dict, serve_provenance: dict) -> str | None:
    """The MEASURED key that describes serving against training, from the provenance fields."""
    quant = str(serve_provenance.get("quantization") or "").lower()
    for scheme in ("int4", "int8", "fp8"):
        if scheme in quant:
            return f"{scheme} weights"
    t, s = str(train_provenance.get("dtype") or ""), str(serve_provenance.get("dtype") or "")
    if t and s:
        return f"{s} vs {t}" if s != t else f"{s}, other batch size"
    return None


def expected_drift(train_provenance: dict, serve_provenance: dict) -> dict | None:
    setting = setting_of(train_provenance, serve_provenance)
    if setting is None or setting not in MEASURED:
        return None
    return {"setting": setting, **MEASURED[setting]}
