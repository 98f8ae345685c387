"""Check a drafter against the dumps and its target before running anything; each problem a finding.

Codes (docs/findings.md, "Drafter checks"): ``drafter_tap_ids`` (the ids the drafter config gives
the engine do not capture what the serve dump holds: claimed, or measured by compare),
``drafter_tap_collision`` (ids that collide when the engine sorts and de-duplicates them, or more or
fewer of them than fc takes), ``drafter_hidden_width`` (fc input width against the dumps' H),
``drafter_vocab_map`` (d2t / t2d out of range, miscounted or inconsistent), ``drafter_norm_flags``
(a norm flag without its weights, or weights no flag turns on), ``drafter_target_vocab`` (the
draft-to-target mapping does not fit the target's vocabulary) and ``drafter_use_aux`` (the engine
will skip fc while the drafter was trained on the aux concat).
"""

from __future__ import annotations

from alignprobe.accept.checkpoint import DrafterCheckpoint
from alignprobe.findings import Finding, Subject, make


def check_drafter(ckpt: DrafterCheckpoint, *, hidden_size: int | None, num_layers: int | None,
                  serve_claim=None, serve_engine: str = "", measured: list[str] | None = None,
                  target_vocab: int | None = None) -> list[Finding]:
    """``serve_claim``: the StreamClaim of the serve stream that feeds the drafter; ``measured``: the
    labels compare's mapping search found for its slices (``HF[5]``), when a comparison ran."""
    findings: list[Finding] = []
    findings += _collisions(ckpt)
    findings += _width(ckpt, hidden_size)
    findings += _vocab(ckpt, target_vocab)
    findings += _norm_flags(ckpt)
    if num_layers and ckpt.layer_ids is not None:
        findings += _tap_ids(ckpt, num_layers, serve_claim, serve_engine, measured)
    if not ckpt.use_aux_hidden_state and ckpt.fc_input_width:
        findings.append(make(
            "drafter_use_aux",
            "eagle_config.use_aux_hidden_state is false: vLLM skips fc and feeds the H-wide final state to a drafter whose fc was trained on the aux concat",
            {"use_aux_hidden_state": False, "fc_input_width": ckpt.fc_input_width},
            "set eagle_config.use_aux_hidden_state to true (or drop the key) so the engine captures the aux states"))
    return findings


def engine_hf_indices(ids, num_layers: int, engine: str) -> tuple[tuple[int, ...], str]:
    """The HF indices an engine captures for the drafter's ids (sorted, de-duplicated as it does)."""
    from alignprobe.conventions import map_layer_ids
    from alignprobe.system_flags import SERVE, SYSTEM_FLAGS, system_of

    system = system_of({"engine": engine})
    if system not in SYSTEM_FLAGS or SYSTEM_FLAGS[system].role != SERVE:
        system = "vllm"  # an engine the table does not know (or an extractor standing in) reads ids as vLLM
    mapped = map_layer_ids(system, tuple(ids), num_layers, explicit=True)
    return tuple(sorted(set(mapped.hf_indices))), system


def _collisions(ckpt: DrafterCheckpoint) -> list[Finding]:
    ids = ckpt.layer_ids
    if ids is None:
        return []
    out = []
    nested = (ckpt.config.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids")
    top = ckpt.config.get("eagle_aux_hidden_state_layer_ids")
    if nested is not None and top is not None and list(nested) != list(top):
        out.append(make(
            "drafter_tap_ids",
            f"the config gives two sets of ids: eagle_aux_hidden_state_layer_ids {list(top)} (vLLM reads this one) and "
            f"eagle_config.eagle_aux_hidden_state_layer_ids {list(nested)}",
            {"top_level": list(top), "eagle_config": list(nested)},
            "keep one set of ids, the one training used, in both places"))
    if len(set(ids)) != len(ids):
        out.append(make(
            "drafter_tap_collision",
            f"{ckpt.layer_ids_source} {list(ids)} repeats an id: vLLM de-duplicates them, so fc gets {len(set(ids))} states where it takes {ckpt.num_taps}",
            {"layer_ids": list(ids), "distinct": len(set(ids)), "fc_taps": ckpt.num_taps},
            "give distinct ids, one per tapped layer, as training captured them"))
    elif ckpt.num_taps and len(ids) != ckpt.num_taps and ckpt.use_aux_hidden_state:
        out.append(make(
            "drafter_tap_collision",
            f"{ckpt.layer_ids_source} names {len(ids)} ids but fc takes {ckpt.num_taps} states of H",
            {"layer_ids": list(ids), "fc_taps": ckpt.num_taps, "fc_input_width": ckpt.fc_input_width},
            f"list exactly {ckpt.num_taps} ids, the layers training tapped"))
    return out


def _width(ckpt: DrafterCheckpoint, hidden_size: int | None) -> list[Finding]:
    out = []
    fc_in = ckpt.fc_input_width
    if fc_in and ckpt.target_hidden_size and fc_in % ckpt.target_hidden_size:
        out.append(make(
            "drafter_hidden_width",
            f"fc takes {fc_in} columns, not a multiple of target_hidden_size {ckpt.target_hidden_size}",
            {"fc_input_width": fc_in, "target_hidden_size": ckpt.target_hidden_size},
            "set target_hidden_size to the target's hidden size"))
    if hidden_size and ckpt.target_hidden_size != hidden_size:
        out.append(make(
            "drafter_hidden_width",
            f"the drafter expects target states {ckpt.target_hidden_size} wide, the dumps hold H={hidden_size}",
            {"target_hidden_size": ckpt.target_hidden_size, "dump_hidden_size": hidden_size},
            "use the drafter trained for this target, or dumps of this drafter's target"))
    return out


def unrunnable_width(side: str, stream: str, width: int, fc_input_width: int, why: str, final_kept_apart: bool) -> Finding:
    """The drafter could not run on a dump's stream (``why``: the width it met); ``final_kept_apart``: the dump
    holds id N (the pre-norm final) apart from the aux states, while the drafter takes it as one of its taps."""
    fix = "serve the aux concat the drafter was trained on (EAGLE3 with its layer ids)"
    if final_kept_apart:  # a vLLM capture that split id N off: the engine feeds it to fc with the others
        fix = ("the dump keeps id N (the pre-norm final) apart from the aux states, but it is one of "
               "the drafter's taps and vLLM feeds it to fc: capture again with `capture vllm "
               "--last-layer aux`")
    return make("drafter_hidden_width", f"{side} dump stream {stream!r}: {why}; the engine would fail at the first decode",
                {"stream": stream, "width": width, "fc_input_width": fc_input_width}, fix, subject=Subject(stream))


def _vocab(ckpt: DrafterCheckpoint, target_vocab: int | None) -> list[Finding]:
    import torch

    out = []
    vocab = target_vocab or ckpt.target_vocab_size
    draft = ckpt.draft_vocab_size
    if ckpt.d2t is not None:
        if ckpt.d2t.numel() != draft:
            out.append(_vocab_finding(f"d2t has {ckpt.d2t.numel()} entries for a draft vocab of {draft} (lm_head rows)",
                                      {"d2t_entries": ckpt.d2t.numel(), "draft_vocab": draft}))
            return out
        targets = torch.arange(draft) + ckpt.d2t
        if vocab is not None:
            bad = int(((targets < 0) | (targets >= vocab)).sum())
            if bad:
                out.append(_vocab_finding(f"d2t maps {bad} draft ids outside the target vocab 0..{vocab - 1}",
                                          {"out_of_range": bad, "target_vocab": vocab}))
        if int(targets.unique().numel()) != draft:
            out.append(_vocab_finding(f"d2t maps {draft - int(targets.unique().numel())} draft ids onto a target id already taken",
                                      {"duplicates": draft - int(targets.unique().numel())}))
        if ckpt.t2d is not None:
            count = int(ckpt.t2d.sum())
            if count != draft:
                out.append(_vocab_finding(f"t2d marks {count} target ids, the draft vocab has {draft}",
                                          {"t2d_count": count, "draft_vocab": draft}))
            elif ckpt.t2d.numel() > int(targets.max()) and not bool(ckpt.t2d[targets.clamp(0, ckpt.t2d.numel() - 1)].all()):
                out.append(_vocab_finding("d2t and t2d disagree: some d2t targets are not marked in t2d",
                                          {"unmarked": int((~ckpt.t2d[targets.clamp(0, ckpt.t2d.numel() - 1)]).sum())}))
    elif vocab is not None and draft != vocab:
        out.append(_vocab_finding(f"the draft vocab has {draft} ids and the target {vocab}, but the checkpoint has no d2t mapping",
                                  {"draft_vocab": draft, "target_vocab": vocab}))
    if target_vocab is not None and ckpt.t2d is not None and ckpt.t2d.numel() != target_vocab:
        out.append(make(
            "drafter_target_vocab",
            f"t2d covers {ckpt.t2d.numel()} target ids, the target has {target_vocab}",
            {"t2d_length": ckpt.t2d.numel(), "target_vocab": target_vocab},
            "use the drafter trained for this target's tokenizer"))
    if target_vocab is not None and ckpt.target_vocab_size and ckpt.target_vocab_size != target_vocab and ckpt.t2d is None:
        out.append(make(
            "drafter_target_vocab",
            f"the drafter config says a target vocab of {ckpt.target_vocab_size}, the target has {target_vocab}",
            {"config_target_vocab": ckpt.target_vocab_size, "target_vocab": target_vocab},
            "use the drafter trained for this target's tokenizer"))
    return out


def _vocab_finding(title: str, evidence: dict) -> Finding:
    return make("drafter_vocab_map", title, evidence,
                "regenerate the vocab mapping from the training data (SpecForge vocab_mapping.pt) and save d2t/t2d with the drafter")


def _norm_flags(ckpt: DrafterCheckpoint) -> list[Finding]:
    out = []
    has_input_norm = "input_norm.weight" in ckpt.weights
    has_fc_norm = any(k.startswith("fc_norm.") for k in ckpt.weights)
    if ckpt.norm_before_fc != has_input_norm:
        out.append(make(
            "drafter_norm_flags",
            ("norm_before_fc is set but the checkpoint has no input_norm.weight" if ckpt.norm_before_fc else
             "the checkpoint has input_norm.weight but norm_before_fc is not set: the engine will skip that norm"),
            {"norm_before_fc": ckpt.norm_before_fc, "input_norm_weight": has_input_norm},
            "make the flag match the weights the drafter was trained with"))
    if ckpt.fc_norm != has_fc_norm:
        out.append(make(
            "drafter_norm_flags",
            ("fc_norm is set but the checkpoint has no fc_norm.* weights" if ckpt.fc_norm else
             "the checkpoint has fc_norm.* weights but fc_norm is not set: the engine will skip those norms"),
            {"fc_norm": ckpt.fc_norm, "fc_norm_weights": has_fc_norm},
            "make the flag match the weights the drafter was trained with"))
    if ckpt.norm_before_fc or ckpt.fc_norm:
        out.append(make(  # flags and weights agree: what the engine must do, not a fault of the drafter
            "drafter_norm_flags",
            "the drafter needs a norm before fc: vLLM reads norm_before_fc from eagle_config only since PR #42143; older engines skip it",
            {"norm_before_fc": ckpt.norm_before_fc, "fc_norm": ckpt.fc_norm},
            "serve with an engine version that applies the pre-fc norm", cap="info"))
    return out


def _tap_ids(ckpt, num_layers, serve_claim, serve_engine, measured) -> list[Finding]:
    from alignprobe.errors import BadInput

    try:
        expected, system = engine_hf_indices(ckpt.layer_ids, num_layers, serve_engine)
    except BadInput as exc:
        return [make("drafter_tap_ids", f"{ckpt.layer_ids_source} {list(ckpt.layer_ids)}: {exc}",
                     {"layer_ids": list(ckpt.layer_ids)}, "give ids inside the target's layer range")]
    out = _fixed_taps(ckpt, num_layers, expected, system)
    if serve_claim is not None and len(serve_claim.hf_indices) > 1:
        claimed = tuple(serve_claim.hf_indices)
        if len(claimed) == ckpt.num_taps + 1 and claimed[-1] == num_layers:
            claimed = claimed[:-1]  # speculators / extract_hidden_states: 3 aux + the final state
        if tuple(sorted(claimed)) != expected:
            out.append(make(  # what the dump claims, not what was measured: at most a warning
                "drafter_tap_ids",
                f"the drafter's {ckpt.layer_ids_source} {list(ckpt.layer_ids)} capture HF{list(expected)} on {system}, "
                f"the serve dump claims HF{list(claimed)}",
                {"layer_ids": list(ckpt.layer_ids), "engine": system, "expected_hf": list(expected), "claimed_hf": list(claimed)},
                "capture the serve dump with the drafter's own ids, or fix the ids the server was given", cap="warn"))
    if measured:
        labels = [f"HF[{i}]" for i in expected]
        got = [m.split()[0] if m else None for m in measured][: len(labels)]
        # slices nothing explained measured as nothing: they neither confirm nor contradict the ids
        if any(g is not None and g != want for g, want in zip(got, labels)):
            out.append(make(
                "drafter_tap_ids",
                f"the serve dump measures as {', '.join(got)} where the drafter's ids give {', '.join(labels)}",
                {"measured": got, "expected": labels, "layer_ids": list(ckpt.layer_ids)},
                "serve with the layer ids the drafter was trained on (see the layer_offset / wrong_taps finding)"))
    return out


def _fixed_taps(ckpt, num_layers: int, taps: tuple[int, ...], system: str) -> list[Finding]:
    """An engine that reads no ids (LMDeploy) feeds its own taps: the drafter's ids, read either way a
    trainer numbers them (the input of layer k, as vLLM and speculators; the output, as SpecForge), name
    other layers than those taps, so the drafter gets states it was not trained on and nothing fails."""
    from alignprobe.conventions import FIXED_TAPS, map_layer_ids
    from alignprobe.errors import BadInput
    from alignprobe.system_fixes import fixed_taps_fix
    from alignprobe.system_flags import SYSTEM_FLAGS

    if system not in FIXED_TAPS:
        return []
    readings = {}
    for reader, how in (("vllm", "as inputs of layers"), ("specforge", "as outputs of layers")):
        try:
            readings[how] = sorted(set(map_layer_ids(reader, tuple(ckpt.layer_ids), num_layers).hf_indices))
        except BadInput:
            continue
    if any(tuple(hf) == taps for hf in readings.values()):
        return []
    said = "; ".join(f"HF{hf} {how}" for how, hf in readings.items()) or "no layers of this target"
    return [make(
        "drafter_tap_ids",
        f"{SYSTEM_FLAGS[system].name} ignores the drafter's {ckpt.layer_ids_source} {list(ckpt.layer_ids)}: it feeds "
        f"HF{list(taps)} whatever they say, and those ids name other layers ({said})",
        {"layer_ids": list(ckpt.layer_ids), "engine": system, "fixed_taps_hf": list(taps), "id_readings": readings},
        fixed_taps_fix(system, num_layers), cap="warn")]
