"""``short_rows``: samples an engine returned with fewer rows than their prompt has tokens.

A capture keeps such a sample (its rows at the positions they were computed for, the prompt's
suffix, NaN placeholders before them) and marks it in the dump (alignprobe/dump/marks.py); pairing
compares only the rows returned (compare/pairing.py). This finding names the samples, how many rows
came back, and the engine setting that cuts them: SGLang's radix cache returns only the rows after
the cached prefix and chunked prefill only the last chunk (docs/dump-format.md, "Marks"); vLLM's hidden-
states connector gets only the tokens it computes, so a prefix-cache hit leaves the prefix out.
A warning: the rows that were compared are judged as usual, but the missing ones were not seen.
"""

from __future__ import annotations

from alignprobe.compare.pairing import sample_pairs
from alignprobe.compare.policy import Policy
from alignprobe.findings import Finding, make
from alignprobe.dump import Dump
from alignprobe.conventions import SGLANG_FLAGS_FULL_ROWS as SGLANG_FULL_ROWS  # the flags that return every row
from alignprobe.system_flags import system_of

EXAMPLES = 20  # short samples listed in the evidence (all are counted)
VLLM_FULL_ROWS = "--no-enable-prefix-caching (LLM(enable_prefix_caching=False) offline)"
# the systems whose rows come from SGLang's server, or from vLLM's hidden-states connector
THROUGH_SGLANG, THROUGH_VLLM = ("sglang", "specforge"), ("vllm", "speculators", "modelopt-vllm")


def short_row_findings(train: Dump, serve: Dump, policy: Policy) -> list[Finding]:
    """One finding per side whose dump marks samples as short (among the samples that pair)."""
    _, pairs = sample_pairs(train, serve)
    out = []
    for side, dump in (("serve", serve), ("train", train)):
        marks = getattr(dump, "marks", None)
        if marks is None:
            continue
        paired = {s if side == "serve" else t for t, s in pairs}
        short = [int(i) for i in marks.short_indices() if dump.sample_ids[int(i)] in paired]
        if short:
            out.append(_finding(side, dump, short, policy))
    return out


def _finding(side: str, dump: Dump, short: list[int], policy: Policy) -> Finding:
    samples: list[dict] = []
    marks = dump.marks
    assert marks is not None  # short rows are found from the marks
    missing = 0
    for i in short:
        m = marks.mark(i)
        missing += m.length - m.rows_returned
        if len(samples) < EXAMPLES:
            samples.append({"sample_id": dump.sample_ids[i], "rows_returned": m.rows_returned, "tokens": m.length,
                            "positions_returned": f"{m.returned[0]}-{m.returned[1] - 1}" if m.rows_returned else "none"})
    provenance = {"engine": dump.provenance.engine, "capture": dump.provenance.capture}
    risks = (dump.provenance.capture or {}).get("full_row_risks") or []
    cause, fix = cause_and_fix(system_of(provenance), risks)
    first = samples[0]
    title = (f"{len(short)} {side} sample(s) came back with fewer rows than tokens (first: "
             f"{first['sample_id']}, {first['rows_returned']} of {first['tokens']} rows); only the rows returned "
             f"were compared, {missing} rows were not seen")
    evidence = {"side": side, "short_samples": len(short), "rows_not_returned": missing, "samples": samples,
                "likely_cause": cause}
    if risks:
        evidence["server_settings"] = list(risks)
    return make("short_rows", title, evidence, fix, policy=policy)


def cause_and_fix(system: str, risks: list[str]) -> tuple[str, str]:
    if system in THROUGH_SGLANG:
        said = f" (the capture recorded: {'; '.join(risks)})" if risks else ""
        return ("SGLang's radix cache returns rows only for the tokens after a cached prefix, and chunked "
                f"prefill keeps only the last chunk{said}",
                f"Relaunch the SGLang server with {SGLANG_FULL_ROWS}, then capture again into a new file: "
                "every prompt's rows then come back whole.")
    if system in THROUGH_VLLM:
        return ("vLLM's hidden-states connector gets only the tokens it computes: a prefix-cache hit leaves "
                "the cached prefix out",
                f"Run vLLM with {VLLM_FULL_ROWS}, then capture again into a new file.")
    return ("the engine returned rows only for part of each prompt (a prefix cache or chunked prefill)",
            f"Turn off the engine's prefix cache and chunked prefill (SGLang: {SGLANG_FULL_ROWS}; vLLM: "
            f"{VLLM_FULL_ROWS}), then capture again.")
