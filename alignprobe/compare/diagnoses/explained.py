"""Findings from the explanations (compare/explain/): the cause each serve stream's slices point to.

Where every slice of a stream is explained as identity (or identity with numeric drift), the
numeric findings of the streaming pass speak, and a mapping finding the fits contradict is
dropped. Where some slice is explained otherwise, that explanation is the finding: its fitted
parameters are the evidence, and the mapping / scale / drift findings of that stream, which judged
it as the expected slice or as a tap, are replaced.
"""

from __future__ import annotations

from alignprobe.compare.diagnoses import finding
from alignprobe.compare.diagnoses.engine_fix import offset_fix
from alignprobe.compare.policy import Policy
from alignprobe.compare.result import Finding, SliceExplanation

SAME_INDEX = ("identity", "drift")
# codes a stream's explanations replace when some slice is not its expected train slice
REPLACED = ("layer_offset", "wrong_taps", "final_norm_mismatch", "scale_mismatch", "numeric_drift",
            "position_drift", "claim_mismatch", "mapping_ambiguous")
# ... and those the fits contradict when every slice is its expected train slice
CONTRADICTED = ("layer_offset", "wrong_taps", "final_norm_mismatch")

FIXES = {
    "duplicate_tap": ("duplicate_tap", "Give the engine every layer id training used, each once: one aux id is "
                      "repeated (or clamped to a neighbour) and another layer is never captured."),
    "row_shift": ("row_shift", "The engine returns each state one position off although the token ids agree: "
                  "check how the capture slices the prefill output (a dropped BOS row, an off-by-one in the "
                  "extend offsets, chunked prefill)."),
    "foreign_rows": ("foreign_rows", "Rows belong to another request: the capture mixes up the order of a batch "
                     "(request ids against the batch order), returns stale rows of the previous request, or keeps "
                     "padding rows of a padded batch. Capture one request at a time to confirm, then fix the "
                     "request-to-row bookkeeping."),
    "residual_split": ("residual_split", "The engine captured the layer's hidden output without the residual "
                       "added (fused add-norm keeps them apart): capture hidden_states + residual."),
    "scalar_scale": ("scale_mismatch", "A scale applied on one side only: an embedding multiplied by sqrt(H), a "
                     "residual multiplier, a dequantization scale left out. Find where one side multiplies."),
    "channel_scale": ("channel_scale", "A norm weight applied on one side only (pre- vs post-norm state, a "
                      "norm_before_fc-style flag): capture both sides at the same point of the norm."),
    "channel_permutation": ("channels_permuted", "The serve state's channels are the training ones in blocks of H/t, "
                            "in another order: a tensor-parallel all-gather concatenated the ranks' shards out of rank "
                            "order (the evidence gives which train block each serve block is). Gather the shards in "
                            "rank order (or capture with tensor parallelism 1 to confirm)."),
    "end_aligned_rows": ("row_shift", "The serve rows are the sample's LAST states given its first tokens' ids (serve row i "
                         "is train row i+d, d the train sample's length minus the serve one's): an engine with chunked "
                         "prefill that returns only the last chunk (SGLang: --chunked-prefill-size -1), and a capture "
                         "that truncates the token ids to the rows it got. The capture should place the rows it got at "
                         "their positions and mark the sample short."),
    "reinterpreted": ("dtype_misread", "The serve values are the right numbers' bits read in another 16-bit dtype "
                      "(bfloat16 as float16, or the reverse): the capture took the engine's raw buffer in the dtype "
                      "it expected. Read it in the dtype the engine ran in (the server's --dtype); the states "
                      "themselves are right."),
    "saturated": ("saturated", "Values are clipped at +-limit: the serve side casts or stores the states in a narrow "
                  "format (FP8 E4M3 saturates at 448) without a scale that fits their range, or with one calibrated "
                  "on smaller states. Store them with a per-tensor or per-row scale (as speculators' FP8 connector "
                  "writes hidden_states_scales), or in bfloat16."),
    "rotation": ("rotated", "The serve states are a rotation of the training ones (QuaRot / SpinQuant rotations "
                 "folded into one side's weights): capture training from the rotated model, or un-rotate "
                 "before the drafter."),
    "nothing_fits": ("unexplained", "The states are no transform of any train state we know: another model or "
                     "revision, a broken capture, or a train dump that lacks the layer (capture it with every "
                     "layer to widen the search). Check that both sides run the same checkpoint."),
}


DISPLACED_FIX = (" Rows come in displaced blocks: an engine with chunked prefill that returns only the last chunk "
                 "(SGLang: --chunked-prefill-size -1), chunks stitched out of order, or a prefix-cache hit whose "
                 "rows were never computed (SGLang --disable-radix-cache, vLLM --no-enable-prefix-caching); "
                 "a capture should place the rows it got at their positions and mark the sample short.")


def explanation_findings(stream: str, role: str, explained: list[SliceExplanation], expected_hf: list[int],
                         num_layers: int, policy: Policy, serve_provenance: dict, train_provenance: dict,
                         drafter_reads_aux: bool, mapped_ok: list[bool] | None = None) -> list[Finding]:
    """``mapped_ok``: per serve slice, the mapping search measured it as its expected train slice; such a
    slice that no explanation fits is the right layer too far off to name: numeric_drift judges it."""
    mapped_ok = mapped_ok or [False] * len(explained)
    off = [e for e in explained if e.winner.name not in SAME_INDEX
           and not (e.winner.name == "nothing_fits" and mapped_ok[e.serve_slice])]
    if not off:
        return []
    out: list[Finding] = []
    offsets = [e for e in off if e.winner.name == "index_offset"]
    if offsets:
        out.append(_offset_finding(stream, role, offsets, explained, expected_hf, num_layers, policy,
                                   serve_provenance, train_provenance, drafter_reads_aux))
    by_name: dict[str, list[SliceExplanation]] = {}
    for e in off:
        if e.winner.name != "index_offset":
            by_name.setdefault(e.winner.name, []).append(e)
    # One finding per code: slices of one stream explained by two explanations of one cause (rows of
    # other samples found as whole samples on some slices, as blocks on others) are one finding.
    by_code: dict[str, tuple[str, list[SliceExplanation]]] = {}
    for name, group in by_name.items():
        if name == "displaced_rows":  # no FIXES entry: rows out of place inside their sample (row_shift) or from others
            code = "row_shift" if all(e.winner.params.get("code") == "row_shift" for e in group) else "foreign_rows"
            fix = FIXES[code][1] + DISPLACED_FIX
        else:
            code, fix = FIXES[name]
        if name == "channel_scale" and all(_is_final(e, num_layers) for e in group):
            code = "final_norm_mismatch"
            fix = ("The final state is on the other side of the final norm: vLLM and speculators store it before "
                   "the norm (id N is pre-norm), SGLang and transformers after it; pair like with like (capture "
                   "training with final_prenorm) or apply the norm.")
        if code in by_code:  # the displaced-block advice is kept where either explanation found blocks
            first_fix, first_group = by_code[code]
            fix = first_fix if first_fix.endswith(DISPLACED_FIX) else fix
            group = sorted(first_group + group, key=lambda e: e.serve_slice)
        by_code[code] = (fix, group)
    for code, (fix, group) in by_code.items():
        name = group[0].winner.name
        severity = None
        if code == "final_norm_mismatch" and drafter_reads_aux and role == "final":
            severity = "info"  # an EAGLE-3 drafter reads the aux concat, never this state
        out.append(finding(code, _title(name, group), _evidence(group), fix, policy, stream=stream, role=role,
                           severity=severity))
    return out


def _is_final(e: SliceExplanation, num_layers: int) -> bool:
    return e.winner.params.get("hf_index") == num_layers


def _title(name: str, group: list[SliceExplanation]) -> str:
    where = ", ".join(e.label for e in group)
    first = group[0].winner
    return f"{where}: {first.summary} (held-out rel-RMS {_g(first.held_out_rel_rms)})"


def _g(x: float) -> str:
    return f"{x:.3g}" if x == x else "not measurable"


def _evidence(group: list[SliceExplanation]) -> dict:
    return {"explained": [
        {"serve_slice": e.serve_slice, "expected": e.label, "explanation": e.winner.name,
         "params": e.winner.params, "held_out_rel_rms": e.winner.held_out_rel_rms,
         "held_out_rows": e.winner.held_out_rows,
         "runner_up": e.runner_up.name if e.runner_up else "",
         "runner_up_held_out_rel_rms": e.runner_up.held_out_rel_rms if e.runner_up else None}
        for e in group]}


def _offset_finding(stream, role, offsets, explained, expected_hf, num_layers, policy, serve_provenance,
                    train_provenance, drafter_reads_aux) -> Finding:
    shifts = {e.winner.params["offset"] for e in offsets}
    measured = {e.serve_slice: e.winner.params["measured"] for e in offsets}
    labels = [measured.get(e.serve_slice, e.label) for e in explained]
    evidence = _evidence(offsets)
    all_shifted = len(offsets) == len(explained)
    if len(shifts) == 1 and next(iter(shifts)) == 0:
        # the same HF index in its other final-norm form: pair with the one it equals
        code = "final_norm_mismatch"
        severity = "info" if drafter_reads_aux and role == "final" else None
        title = (f"the serve final state is {labels[-1]}, the other form of HF[{num_layers}] than expected "
                 f"({explained[-1].label}); compared with the one it equals")
        fix = "Nothing to fix when the drafter does not read this state; otherwise capture both sides at the same side of the final norm."
        return finding(code, title, evidence, fix, policy, stream=stream, role=role, severity=severity)
    if len(shifts) == 1 and all_shifted:
        shift = shifts.pop()
        fix, cause = offset_fix(shift, expected_hf, serve_provenance, train_provenance)
        basis = sorted({e.winner.params.get("basis", "measured") for e in offsets})
        evidence.update(shift=shift, convention=cause, conventions=[cause], basis=basis, measured=labels,
                        expected=[e.label for e in explained])
        title = (f"layer offset {shift:+d}: the serve side captured {', '.join(labels)} where training used "
                 f"{', '.join(e.label for e in explained)}"
                 + _claims_note(offsets, basis))
        return finding("layer_offset", title, evidence, fix, policy, stream=stream, role=role)
    evidence.update(measured=labels, expected=[e.label for e in explained],
                    deltas=[e.winner.params.get("offset", 0) for e in explained])
    title = (f"wrong taps: the serve side captured {', '.join(labels)} where training used "
             f"{', '.join(e.label for e in explained)}")
    fix = ("Set the engine's aux layer ids to the ones the drafter was trained on, in the drafter config "
           "(eagle_aux_hidden_state_layer_ids) and the engine's capture list.")
    return finding("wrong_taps", title, evidence, fix, policy, stream=stream, role=role)


def _claims_note(offsets: list[SliceExplanation], basis: list[str]) -> str:
    if "claims" not in basis:
        return ""
    if any(e.winner.params.get("unverified") for e in offsets):
        return (" (from both sides' claims alone: the train dump holds none of the layers the serve side claims, "
                "so no slice could be checked; capture the train side with every layer to measure it)")
    return " (inferred from both sides' claims and the slices that match exactly)"


def merged(new: Finding, old: Finding) -> Finding:
    """One finding where the explanations and the measurements name the same code: the measured
    evidence, title and fix stay (a layer offset takes the engine-aware fix), the explanations' evidence
    is added."""
    old.evidence = {**old.evidence, **new.evidence}
    if new.code == "layer_offset":  # the fix that names the serve engine's convention
        partial = old.fix[old.fix.find(" The train dump holds only"):] if " The train dump holds only" in old.fix else ""
        old.fix = (new.fix or old.fix) + partial
    old.severity = new.severity if new.severity != old.severity and new.code == old.code else old.severity
    return old
