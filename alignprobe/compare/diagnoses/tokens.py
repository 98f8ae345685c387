"""Findings about which samples and tokens the two dumps share, and what a token-level cause tells
the findings about states (RULES): it comes first."""

from __future__ import annotations

import collections
from collections.abc import Sequence

from alignprobe.compare.policy import Policy
from alignprobe.compare.result import TokenCheck
from alignprobe.findings import Annotates, Finding, Note, make, render
from alignprobe.findings.severity import Severity

EXAMPLES = 5
# findings about how far the states are apart, which a token-level cause alone produces
CONTEXT_DEPENDENT = ("numeric_drift", "position_drift", "unexplained")


def _other_context(shift: Finding) -> Note:
    """Where the token ids are shifted (a BOS, a system prefix or a chat template on one side only), every
    aligned row was computed on another context (its attention saw one prefix token more or less), so
    the states differ whatever the capture did: the drift or unexplained findings say that the token
    shift comes first, not a cause of their own. Measured on tests/cases/holdout3_cases.py no_bos: a BOS on
    the train side only leaves rel-RMS 0.06-0.08 on a 7-layer Llama (numeric_drift, "MORE than that
    setting explains") and 0.23-0.33 on a 9-layer DeepseekV3 (unexplained)."""
    samples = shift.evidence.get("samples")
    return Note("token_shift_first", {"token_shift_samples": samples},
                headline=f"; {samples} samples' token ids are shifted (token_shift), so their states were computed "
                         "on another context: fix the tokens first",
                fix_before="Send the same token ids both ways first (see token_shift: a BOS, system prefix or chat "
                           "template on one side only); states of other contexts differ whatever the capture does. ")


def _serve_stops_first(padding: Finding) -> bool:
    return bool(padding.evidence.get("sides", {}).get("train"))


def _later_rows(padding: Finding) -> Note:
    """Where the serve samples stop before the train ones (token_padding on the train side: the serve
    token ids are a prefix of the train ones) and the states do not agree, the serve rows may be states
    of LATER positions given the first tokens' ids: a capture of a chunked prefill that keeps only the
    last chunk and truncates the token ids to the rows it got. The explanations read only the common
    token part, so they cannot test that; the drift / unexplained findings say so instead of standing
    as a cause of their own. Measured on tests/cases/holdout3_cases.py and tests/cases/holdout4_cases.py
    chunk_last_at_start: numeric_drift on a 7-layer Llama, unexplained on the DeepseekV3s and a Qwen3."""
    samples = padding.evidence["sides"]["train"]
    return Note("serve_samples_shorter", {"serve_samples_shorter": samples},
                headline=f"; {samples} serve samples stop before their train samples, so their rows may be states of "
                         "later positions (a chunked prefill's last chunk given the first tokens' ids), which the "
                         "explanations cannot test: only the common token part is compared",
                fix_before="Check first that the serve capture returns a row for every prompt token at its own "
                           "position (a chunked prefill that keeps the last chunk only: SGLang --chunked-prefill-size "
                           "-1, or place the rows at their positions and mark the sample short). ")


RULES = (Annotates("token_shift", CONTEXT_DEPENDENT, _other_context),
         Annotates("token_padding", CONTEXT_DEPENDENT, _later_rows, when=_serve_stops_first))


def token_findings(check: TokenCheck, policy: Policy, short_rows: Sequence[Finding] = ()) -> list[Finding]:
    """``short_rows``: the samples the engine returned with fewer rows than tokens (short_rows.py),
    which no_aligned_tokens names as the reason where the token ids agreed."""
    out: list[Finding] = []
    if check.train_only or check.serve_only or not check.paired:
        severity: Severity | None = "error" if not check.paired else None
        out.append(
            make(
                "sample_mismatch",
                f"{check.paired} samples paired by {'token sequence' if check.paired_by == 'tokens' else 'id'}; {check.train_only} only in the train dump, "
                f"{check.serve_only} only in the serve dump",
                {
                    "paired": check.paired,
                    "paired_by": check.paired_by,
                    "train_only": check.train_only,
                    "serve_only": check.serve_only,
                    "train_only_examples": check.train_only_examples[:EXAMPLES],
                    "serve_only_examples": check.serve_only_examples[:EXAMPLES],
                },
                "Capture both sides from the same prompt file (same sample ids); unpaired samples are "
                "left out of every number.",
                policy=policy,
                severity=severity,
            )
        )
    by_kind: dict[str, list] = collections.defaultdict(list)
    for issue in check.issues:
        by_kind[issue.kind].append(issue)
    counts = check.issue_counts
    if counts.get("shift"):
        k = int(max(check.shift_counts, key=lambda shift: check.shift_counts[shift]))
        out.append(
            make(
                "token_shift",
                f"{counts['shift']} samples have their token ids shifted "
                f"(serve token i = train token i{k:+d} in most); states were compared on the aligned part",
                {
                    "samples": counts["shift"],
                    "shifts": dict(sorted(check.shift_counts.items(), key=lambda kv: int(kv[0]))),
                    "examples": [
                        {"sample_id": i.sample_id, "shift": i.shift, "train_len": i.train_len,
                         "serve_len": i.serve_len, "aligned_length": i.aligned_length}
                        for i in by_kind["shift"][:EXAMPLES]
                    ],
                },
                "A positive shift means the serve side lacks the first tokens: a prefix-cache hit returned "
                "only the uncached suffix (SGLang: --disable-radix-cache, and --chunked-prefill-size -1), or "
                "training added a BOS the engine did not; a negative shift is the reverse. Send the same "
                "token ids both ways (input_ids, not text).",
                policy=policy,
            )
        )
    if counts.get("divergent"):
        first = by_kind["divergent"][0] if by_kind["divergent"] else None
        where = f" (first at position {first.first_divergence} of {first.sample_id!r})" if first else ""
        out.append(
            make(
                "token_mismatch",
                f"{counts['divergent']} samples have different token ids{where}; states were compared up to "
                "the first difference",
                {
                    "samples": counts["divergent"],
                    "examples": [
                        {"sample_id": i.sample_id, "first_divergence": i.first_divergence,
                         "train_token": i.train_token, "serve_token": i.serve_token,
                         "train_text": i.train_text, "serve_text": i.serve_text,
                         "aligned_length": i.aligned_length}
                        for i in by_kind["divergent"][:EXAMPLES]
                    ],
                },
                "Both sides must see the same token ids: send input_ids rather than text, and apply the "
                "same chat template and special tokens on both sides.",
                policy=policy,
            )
        )
    if counts.get("padding"):
        sides = collections.Counter(i.padded_side for i in by_kind["padding"])  # of the samples kept
        out.append(
            make(
                "token_padding",
                f"{counts['padding']} samples carry extra trailing tokens on one side "
                f"({', '.join(f'{n} on the {s} side' for s, n in sides.items())}"
                f"{' among those listed' if len(by_kind['padding']) < counts['padding'] else ''}); "
                "compared on the common part",
                {
                    "samples": counts["padding"],
                    "sides": dict(sides),
                    "examples": [
                        {"sample_id": i.sample_id, "train_len": i.train_len, "serve_len": i.serve_len}
                        for i in by_kind["padding"][:EXAMPLES]
                    ],
                },
                "Usually right padding kept by an extractor (SpecForge rows with loss_mask 0) or generated "
                "tokens on the serve side; strip them at capture if they should not be there.",
                policy=policy,
            )
        )
    if check.paired and not check.aligned_tokens:
        out.append(_no_aligned_tokens(check, policy, [] if counts.get("shift") or counts.get("divergent") else short_rows))
    return out


def _no_aligned_tokens(check: TokenCheck, policy: Policy, short_rows: Sequence[Finding]) -> Finding:
    """Where no token row lined up while the tokens agreed (no mismatch or shift) and samples came back
    short, the rows were never returned: say so, with short_rows' fix, not "capture the same token ids"
    (the ids were the same)."""
    title = "no token rows line up between the two dumps, so no hidden state could be compared"
    fix = "Capture both sides from the same token ids (see token_mismatch / token_shift)."
    if short_rows:
        short = short_rows[0]
        title += (f"; {short.evidence['short_samples']} {short.evidence['side']} sample(s) came back with fewer rows "
                  "than tokens (short_rows)")
        fix = "The engine did not return the rows (see short_rows): " + render.fix(short)
    return make("no_aligned_tokens", title, {"paired": check.paired, "compared_samples": check.compared_samples},
                fix, policy=policy)
