"""Findings about which samples and tokens the two dumps share."""

from __future__ import annotations

import collections

from alignprobe.compare.diagnoses import finding
from alignprobe.compare.policy import Policy
from alignprobe.compare.result import Finding, TokenCheck

EXAMPLES = 5


def token_findings(check: TokenCheck, policy: Policy) -> list[Finding]:
    out: list[Finding] = []
    if check.train_only or check.serve_only or not check.paired:
        severity = "error" if not check.paired else None
        out.append(
            finding(
                "sample_mismatch",
                f"{check.paired} samples paired by id; {check.train_only} only in the train dump, "
                f"{check.serve_only} only in the serve dump",
                {
                    "paired": check.paired,
                    "train_only": check.train_only,
                    "serve_only": check.serve_only,
                    "train_only_examples": check.train_only_examples[:EXAMPLES],
                    "serve_only_examples": check.serve_only_examples[:EXAMPLES],
                },
                "Capture both sides from the same prompt file (same sample ids); unpaired samples are "
                "left out of every number.",
                policy,
                severity=severity,
            )
        )
    by_kind = collections.defaultdict(list)
    for issue in check.issues:
        by_kind[issue.kind].append(issue)
    counts = check.issue_counts
    if counts.get("shift"):
        k = int(max(check.shift_counts, key=check.shift_counts.get))
        out.append(
            finding(
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
                policy,
            )
        )
    if counts.get("divergent"):
        first = by_kind["divergent"][0] if by_kind["divergent"] else None
        where = f" (first at position {first.first_divergence} of {first.sample_id!r})" if first else ""
        out.append(
            finding(
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
                policy,
            )
        )
    if counts.get("padding"):
        sides = collections.Counter(i.padded_side for i in by_kind["padding"])  # of the samples kept
        out.append(
            finding(
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
                policy,
            )
        )
    if check.paired and not check.aligned_tokens:
        out.append(
            finding(
                "no_aligned_tokens",
                "no token rows line up between the two dumps, so no hidden state could be compared",
                {"paired": check.paired, "compared_samples": check.compared_samples},
                "Capture both sides from the same token ids (see token_mismatch / token_shift).",
                policy,
            )
        )
    return out
