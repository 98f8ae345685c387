"""Findings about the INPUTS themselves, before any cause: the same dump twice, swapped dumps, and a
dtype difference between the sides (named, harmless within tolerance)."""

from __future__ import annotations

import os

from alignprobe.compare.policy import Policy
from alignprobe.findings import Finding, make
from alignprobe.compare.result import StreamComparison
from alignprobe.dump import ROLE_LAYERS, Dump
from alignprobe.system_flags import SERVE, SYSTEM_FLAGS, TRAIN, system_of



def same_dump_findings(train: Dump, serve: Dump, comparisons: list[StreamComparison], policy: Policy) -> list[Finding]:
    """The same file, or bit-identical states: a pipeline misconfiguration, never a silent PASS."""
    same_file = _same_file(train.path, serve.path)
    compared = [m for c in comparisons for m in c.slices if m.tokens]
    identical = bool(compared) and all(m.max_abs_diff == 0 and m.excluded_rows == 0 for m in compared)
    if not same_file and not identical:
        return []
    what = "the same file" if same_file else f"two dumps whose {sum(m.tokens for m in compared)} compared rows are bit-identical"
    # a copy carries the same provenance (its creation time too): an error; bit-identical states of
    # two captures that say they differ (an import of the very states an extractor wrote) are named
    copied = same_file or train.provenance == serve.provenance
    if not copied:
        what += " although their provenance differs"
    return [make(
        "same_dump",
        f"train and serve are {what}: nothing was compared between two captures",
        {"train_path": train.path, "serve_path": serve.path, "same_file": same_file, "same_provenance": copied,
         "bit_identical_slices": [m.label for m in compared if m.max_abs_diff == 0]},
        "Pass the serve engine's capture as --serve-dump and the training extraction as --train-dump; two "
        "captures of different systems are never bit-identical, so the pipeline copied one dump into both places.",
        policy=policy,
        severity=None if copied else "info",
    )]


def _same_file(a: str, b: str) -> bool:
    try:
        return bool(a and b) and os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


def swapped_findings(train: Dump, serve: Dump, policy: Policy) -> list[Finding]:
    """Serving provenance on the train side and extraction provenance on the serve side, or claims that
    only make sense the other way round (the serve side holds every layer, the train side a few)."""
    t_role, s_role = _role(train), _role(serve)
    t_serving = t_role == SERVE or "serving" in train.provenance.engine.lower()
    evidence: dict = {"train_engine": train.provenance.engine, "serve_engine": serve.provenance.engine}
    reasons = []
    if t_serving and s_role == TRAIN:
        reasons.append(f"the train dump comes from {train.provenance.engine}, a serving engine, and the serve dump "
                       f"from {serve.provenance.engine}, an extractor")
    def full_stack(d: Dump) -> bool:
        return any(c.role == ROLE_LAYERS and len(c.hf_indices) == c.num_layers + 1 for c in d.streams.values())
    if full_stack(serve) and not full_stack(train):
        reasons.append("the serve dump holds every layer (an extractor's stack) and the train dump does not")
        evidence["serve_full_stack"] = True
    # a full stack on the serve side alone is legitimate (capture hf --simulate-quant as the serve side)
    if not (reasons and t_serving):
        return []
    evidence["reasons"] = reasons
    return [make(
        "dumps_swapped",
        "the dumps look swapped: " + "; ".join(reasons),
        evidence,
        "Pass the training extraction as --train-dump and the engine's capture as --serve-dump; every finding "
        "below reads the other way round until then.",
        policy=policy,
    )]


def dtype_findings(train: Dump, serve: Dump, policy: Policy) -> list[Finding]:
    t, s = train.provenance.dtype, serve.provenance.dtype
    if not t or not s or _norm(t) == _norm(s):
        return []
    return [make(
        "dtype_mismatch",
        f"the sides ran in different dtypes: serve {s}, train {t} (rounding drift of that size is expected)",
        {"train_dtype": t, "serve_dtype": s},
        "Usually harmless (numeric_drift says when it is not); serve in the dtype the drafter was trained on "
        "for exact agreement.",
        policy=policy,
    )]


def _norm(dtype: str) -> str:
    d = dtype.lower().replace("torch.", "")
    return {"bf16": "bfloat16", "fp16": "float16", "half": "float16", "fp32": "float32", "float": "float32"}.get(d, d)


def _role(d: Dump) -> str:
    """SERVE for an engine's capture, TRAIN for an extractor's, "" for a system the table does not know. An
    imported training set is TRAIN whichever system wrote it (TensorRT-LLM's SaveState files are training data)."""
    if (d.provenance.capture or {}).get("imported_from"):
        return TRAIN
    flags = SYSTEM_FLAGS.get(system_of({"engine": d.provenance.engine, "capture": d.provenance.capture}))
    return flags.role if flags is not None else ""
