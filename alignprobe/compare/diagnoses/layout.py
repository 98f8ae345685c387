"""Findings about WHAT the serve side captured: width, which HF index each slice is, pre/post norm.

The measured mapping (mapping.py) is compared with the expected one (the train stream the serve
stream should equal). Claims in the serve dump are only reported beside the measurement.
"""

from __future__ import annotations

import dataclasses

from alignprobe.compare.policy import Policy
from alignprobe.findings import Finding, Note, Subject, make
from alignprobe.findings.severity import Severity
from alignprobe.compare.result import MappingSearch
from alignprobe.conventions import shift_explanations
from alignprobe.dump import FINAL_NORM_PRE
from alignprobe.system_fixes import aux_on_fix, eagle3_fix, eagle_fix, missing_tap_fix, offset_fix, wrong_taps_fix

Key = tuple[int, str]  # (HF index, "pre"/"post")
PARTIAL_TRAIN = "train_holds_only"  # the note of a mapping finding made on a train dump of some layers only


@dataclasses.dataclass
class Layout:
    findings: list[Finding]
    slice_ok: list[bool]  # per serve slice: measured == expected, so numeric checks apply


def _measured(ms: MappingSearch, policy: Policy) -> list[Key | None]:
    """The key each serve slice measured as, or None when nothing on the train side matches it."""
    out = []
    for m in ms.matches:
        c = ms.candidates[m.best]
        out.append((c.hf_index, c.final_norm) if m.score >= policy.mapping_min_cosine else None)
    return out


def _match_evidence(ms: MappingSearch) -> list[dict]:
    return [
        {
            "serve_slice": m.serve_slice,
            "claimed": ms.claimed[m.serve_slice] if m.serve_slice < len(ms.claimed) else "",
            "expected": ms.expected[m.serve_slice] if m.serve_slice < len(ms.expected) else "",
            "measured": m.best_label,
            "cosine": round(m.score, 6),
            "runner_up": m.runner_up_label,
            "runner_up_cosine": round(m.runner_up_score, 6),
            "margin": round(m.margin, 6),
        }
        for m in ms.matches
    ]


def width_findings(ms: MappingSearch, expected_labels: list[str], hidden_size: int, num_layers: int, policy: Policy,
                   serve_provenance: dict, cap: Severity | None = None) -> list[Finding]:
    """The serve stream holds a different number of H-wide slices than the train stream it should equal."""
    k, k_expected = len(ms.matches), len(expected_labels)
    measured = _measured(ms, policy)
    evidence = {
        "hidden_size": hidden_size,
        "serve_width": k * hidden_size,
        "expected_width": k_expected * hidden_size,
        "expected": expected_labels,
        "claimed": ms.claimed,
        "slices": _match_evidence(ms),
        "tokens_sampled": ms.tokens_sampled,
    }
    what = ", ".join(m.best_label if key else f"no train slice (best {m.best_label})" for m, key in zip(ms.matches, measured))
    if k == 1 and k_expected > 1 and measured[0] is not None and measured[0][0] == num_layers:
        title = (
            f"the drafter is fed the {hidden_size}-wide final state ({what}) where training used the "
            f"{k_expected * hidden_size}-wide concat of {', '.join(expected_labels)}: EAGLE3 aux capture is off"
        )
        fix = eagle3_fix(serve_provenance)
    elif k == 1 and k_expected > 1:
        title = (
            f"the drafter is fed one {hidden_size}-wide state ({what}) where training used the "
            f"{k_expected * hidden_size}-wide concat of {', '.join(expected_labels)}"
        )
        fix = aux_on_fix(serve_provenance)
    elif k > 1 and k_expected == 1:
        title = (
            f"the drafter is fed a {k * hidden_size}-wide concat ({what}) where training used one "
            f"{hidden_size}-wide state ({expected_labels[0]})"
        )
        fix = eagle_fix(serve_provenance)
    elif 1 < k < k_expected and None not in measured and set(ms.measured) < set(expected_labels):
        missing = [label for label in expected_labels if label not in ms.measured]
        evidence["missing"] = missing
        title = (f"missing tap: the serve stream holds {k} slices ({what}) where training used {k_expected}; "
                 f"{', '.join(missing)} was never captured")
        fix = missing_tap_fix(serve_provenance, missing, num_layers)
    else:
        title = f"the serve stream holds {k} slices ({what}) where training used {k_expected} ({', '.join(expected_labels)})"
        fix = f"Configure the engine's aux layer ids so it captures the {k_expected} HF indices training used."
    return [make("width_mismatch", title, evidence, fix, policy=policy, subject=Subject(ms.serve_stream), cap=cap)]


def width_unmeasured(serve_stream: str, width: int, expected_labels: list[str], hidden_size: int, policy: Policy,
                     cap: Severity | None = None) -> Finding:
    """The serve stream is not the width training used, and no aligned rows say what its slices hold."""
    expected_width = len(expected_labels) * hidden_size
    return make(
        "width_mismatch",
        f"serve stream {serve_stream!r} is {width} wide where training used {expected_width} "
        f"({', '.join(expected_labels)}); no aligned rows to measure what it holds",
        {"serve_width": width, "expected_width": expected_width, "hidden_size": hidden_size,
         "expected": expected_labels},
        "Capture both sides from the same token ids, then compare again to see which HF index each slice is.",
        policy=policy,
        subject=Subject(serve_stream),
        cap=cap,
    )


def not_sliceable(serve_stream: str, width: int, hidden_size: int, policy: Policy,
                  cap: Severity | None = None) -> Finding:
    """The serve stream is no whole number of hidden states wide."""
    return make(
        "width_mismatch",
        f"serve stream {serve_stream!r} is {width} wide, not a multiple of the hidden size {hidden_size}",
        {"serve_width": width, "hidden_size": hidden_size, "remainder": width % hidden_size},
        "The serve side is not a concat of hidden states of this model: check that both dumps come from the "
        "same model (hidden size) and that the engine returned whole states (no sharded / tensor-parallel slice).",
        policy=policy,
        subject=Subject(serve_stream),
        cap=cap,
    )


def _partial_train(ms: MappingSearch, num_layers: int) -> tuple[Note, ...]:
    """When the train dump lacks some HF indices, a serve slice may be one of those: the note that says
    so (it goes with the layer offset or wrong taps that the explanations name in this one's place)."""
    held = sorted({c.hf_index for c in ms.candidates})
    if held == list(range(num_layers + 1)):
        return ()
    return (Note(PARTIAL_TRAIN, {"held": held}, fix_after=(
        f" The train dump holds only HF{held}, so a serve slice from another layer can only match its nearest "
        "neighbour: capture the train side with every layer (layers='all') for a definite mapping.")),)


def layout_findings(ms: MappingSearch, expected: list[Key], num_layers: int, policy: Policy,
                    provenances: tuple[dict, dict] = ({}, {}), cap: Severity | None = None) -> Layout:
    """``provenances``: (train, serve), whose engines name the fix of a layer offset."""
    measured = _measured(ms, policy)
    ok = [m == e for m, e in zip(measured, expected)]
    findings: list[Finding] = []
    stream = ms.serve_stream
    base = {"slices": _match_evidence(ms), "tokens_sampled": ms.tokens_sampled, "sampling": ms.sampling}
    margins = [m.margin for m in ms.matches]

    if all(ok):
        if ms.claimed and ms.claimed != ms.expected:
            findings.append(
                make(
                    "claim_mismatch",
                    f"the serve dump claims {', '.join(ms.claimed)} but its states are {', '.join(ms.measured)}, "
                    "as training expects",
                    base,
                    "Nothing to fix in serving; the capture's layer-id convention is recorded wrongly (report it).",
                    policy=policy,
                    subject=Subject(stream),
                    cap=cap,
                )
            )
    elif None in measured:
        lost = [j for j, key in enumerate(measured) if key is None]
        findings.append(
            make(
                "wrong_taps",
                f"serve slice(s) {lost} match no train slice (best cosine "
                f"{max(ms.matches[j].score for j in lost):.3f}): they are not any HF index the train dump holds",
                {**base, "expected": ms.expected, "claimed": ms.claimed},
                "Capture the train side with every layer (layers='all') to find where these states come from; "
                "check the engine's capture point (a residual stream without the residual added, a different "
                "model or revision).",
                policy=policy,
                subject=Subject(stream),
                cap=cap,
            )
        )
    else:
        known = [key for key in measured if key is not None]  # all of them, None was handled above
        findings.append(_mismatch(ms, known, expected, num_layers, base, policy, provenances, cap))

    weak = [
        {"serve_slice": m.serve_slice, "measured": m.best_label, "runner_up": m.runner_up_label, "margin": round(m.margin, 6)}
        for m in ms.matches
        if m.runner_up >= 0 and m.margin < policy.mapping_min_margin and not m.tie_broken_by_norm
    ]
    if weak:
        findings.append(
            make(
                "mapping_ambiguous",
                f"the best train slice wins by less than {policy.mapping_min_margin} cosine for {len(weak)} serve slice(s)",
                {"slices": weak, "min_margin": min(margins), "tokens_sampled": ms.tokens_sampled},
                "Neighbouring layers look alike here; compare more tokens (--sample / a larger prompt set) "
                "before trusting a one-layer difference.",
                policy=policy,
                subject=Subject(stream),
                cap=cap,
            )
        )
    return Layout(findings, ok)


def _mismatch(ms, measured: list[Key], expected: list[Key], num_layers: int, base: dict, policy: Policy,
              provenances: tuple[dict, dict], cap: Severity | None) -> Finding:
    train_provenance, serve_provenance = provenances
    stream, notes = ms.serve_stream, _partial_train(ms, num_layers)
    deltas = [m[0] - e[0] for m, e in zip(measured, expected)]
    evidence = {**base, "expected": ms.expected, "measured": ms.measured, "claimed": ms.claimed}
    if all(d == 0 for d in deltas):
        # Same HF indices, the norms differ: only HF[N] has a pre and a post form.
        pre_served = any(m[1] == FINAL_NORM_PRE and e[1] != FINAL_NORM_PRE for m, e in zip(measured, expected))
        if pre_served:
            title = f"the serve side holds the PRE-norm final state where training used the post-norm HF[{num_layers}]"
            fix = (
                "vLLM and speculators store the last layer's output before the final norm (id N is pre-norm); "
                "apply the model's final norm to it, or train on the same pre-norm state (capture training "
                "with final_prenorm)."
            )
        else:
            title = f"the serve side holds the post-norm HF[{num_layers}] where training used the PRE-norm final state"
            fix = (
                "Training used the pre-norm last state (vLLM / speculators layout) but SGLang and transformers "
                "return it after the final norm; capture both sides at the same point."
            )
        return make("final_norm_mismatch", title, evidence, fix, policy=policy, subject=Subject(stream), cap=cap,
                    notes=notes)
    if len(set(deltas)) == 1:
        shift = deltas[0]
        explanations = shift_explanations(shift)
        margins = [round(m.margin, 6) for m in ms.matches]
        evidence = {**evidence, "shift": shift, "conventions": explanations, "margins": margins}
        title = (
            f"layer offset {shift:+d}: the serve side captured {', '.join(ms.measured)} where training used "
            f"{', '.join(ms.expected)} (each wins by >= {min(margins):.4f} cosine)"
        )
        fix = offset_fix(shift, [e[0] for e in expected], num_layers, serve_provenance, train_provenance)[0]
        return make("layer_offset", title, evidence, fix, policy=policy, subject=Subject(stream), cap=cap, notes=notes)
    permuted = sorted(measured) == sorted(expected)
    title = (
        f"wrong taps: the serve side captured {', '.join(ms.measured)} where training used {', '.join(ms.expected)}"
        + (" (the same layers in another order)" if permuted else " (not a constant shift)")
    )
    fix = (
        "Concatenate the aux states in the order training used (lowest layer first)."
        if permuted
        else wrong_taps_fix(serve_provenance, num_layers)
    )
    return make("wrong_taps", title, {**evidence, "deltas": deltas, "permuted": permuted}, fix, policy=policy,
                subject=Subject(stream), cap=cap, notes=notes)
