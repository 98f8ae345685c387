"""Fix texts for engine-side failures, rendered from the system table (system_flags.SYSTEM_FLAGS)
for the side's system: a vLLM capture is told vLLM's flag, never SGLang's, and the ids are given in
that system's own numbering. A system not in the table gets the generic text. Each text is written
once, by the failure class that makes the finding; nothing reads it afterwards."""

from __future__ import annotations

from typing import Any, Mapping

from alignprobe.conventions import DEEPSEEK_ARCHS, FIXED_TAPS, map_layer_ids, shift_explanations
from alignprobe.system_flags import SERVE, SYSTEM_FLAGS, Flags, ids_in, system_of

Provenance = Mapping[str, Any]

GENERIC_WRONG_TAPS = ("Set the engine's aux layer ids to the ones the drafter was trained on, in the drafter config "
                      "(eagle_aux_hidden_state_layer_ids) and the engine's capture list.")


def _serving(provenance: Provenance) -> Flags | None:
    flags = SYSTEM_FLAGS.get(system_of(provenance))
    return flags if flags is not None and flags.role == SERVE else None


def fixed_taps_fix(system: str, num_layers: int) -> str:
    """The engine reads no ids (LMDeploy): what the drafter must be trained on instead."""
    flags, taps = SYSTEM_FLAGS[system], map_layer_ids(system, None, num_layers).hf_indices
    return (f"{flags.name} reads no layer ids: its taps are fixed at (2, N//2, N-3) = HF{list(taps)} for this "
            f"{num_layers}-layer target, whatever the drafter config says, so the drafter must be trained on "
            f"HF{list(taps)} (or served by an engine that reads its ids).")


def offset_fix(shift: int, expected_hf: list[int], num_layers: int, serve: Provenance,
               train: Provenance) -> tuple[str, str]:
    """(fix, the convention named) for serve = train + ``shift`` layers, the HF indices wanted given."""
    system, trained = system_of(serve), system_of(train)
    flags = SYSTEM_FLAGS.get(system)
    want = ", ".join(str(i) for i in expected_hf)
    if flags is None:
        known = shift_explanations(shift)
        cause = known[0] if known else "no known convention pair gives this shift"
        return (f"Shift the engine's aux layer ids by {-shift:+d} so it captures HF[{want}] (or retrain on the served "
                f"indices). Likely cause: {cause}.", cause)
    if system in FIXED_TAPS:
        return fixed_taps_fix(system, num_layers), f"{flags.name}: {flags.numbering}"
    if system == "sglang" and _deepseek(serve):
        cause = "SGLang's deepseek_v2 (DeepSeek / Kimi) adds +1 to explicit ids only when the first id is 1 (PR #25454)"
        return (f"Configure SGLang's aux layer ids so it captures HF[{want}] ({cause}): "
                f"{_deepseek_ids(expected_hf)}; or retrain on the served indices.", cause)
    cause = f"{flags.name}: {flags.numbering}"
    trained_flags = SYSTEM_FLAGS.get(trained)
    if trained_flags is not None and trained != system:
        cause += f"; the drafter was trained on {trained} states ({trained_flags.numbering})"
    ids = ids_in(system, expected_hf, num_layers)
    if None in ids:
        missing = ", ".join(f"HF[{h}]" for h, k in zip(expected_hf, ids) if k is None)
        return (f"{flags.name} cannot capture {missing} ({cause}; the final layer: {flags.final_layer}): retrain on "
                "the layers it serves.", cause)
    given = ", ".join(str(k) for k in ids)
    return (f"Set {flags.aux_ids} to [{given}] so {flags.name} captures HF[{want}] ({cause}); or retrain on the "
            "served indices.", cause)


def _deepseek(serve: Provenance) -> bool:
    model = " ".join(str(serve.get(k) or "") for k in ("model", "extra")).lower()
    return any(a.replace("_", "") in model.replace("_", "").replace("-", "") for a in DEEPSEEK_ARCHS + ("kimi",))


def _deepseek_ids(expected_hf: list[int]) -> str:
    """The ids that make SGLang's deepseek_v2 capture ``expected_hf``: since PR #25454 ids whose first
    is 1 are read as HF[k+1], others as HF[k]; older servers add 1 to every id."""
    minus = ", ".join(str(i - 1) for i in expected_hf)
    same = ", ".join(str(i) for i in expected_hf)
    if expected_hf and expected_hf[0] == 2:
        return f"explicit ids [{minus}] (the first id is 1, so +1 applies on every SGLang version)"
    if expected_hf and expected_hf[0] == 1:
        return (f"explicit ids [{minus}] on servers older than PR #25454 (+1 to every id); since that PR no "
                "id list reaches HF[1] first (a first id of 1 is read as HF[2])")
    return (f"explicit ids [{same}] since PR #25454 (a first id other than 1 is read as HF[k]), "
            f"[{minus}] on older servers (+1 to every id)")


def wrong_taps_fix(serve: Provenance, num_layers: int) -> str:
    """The serve slices are other layers than trained, not by one shift."""
    system = system_of(serve)
    if system in FIXED_TAPS:
        return fixed_taps_fix(system, num_layers)
    flags = SYSTEM_FLAGS.get(system)
    if flags is None:
        return GENERIC_WRONG_TAPS
    return (f"Set {flags.aux_ids} to the ids the drafter was trained on, in {flags.name}'s numbering "
            f"({flags.numbering}).")


def eagle3_fix(serve: Provenance) -> str:
    """The engine feeds the final state alone where the drafter takes the aux concat."""
    flags = _serving(serve)
    if flags is None:
        return ("Run the engine with --speculative-algorithm EAGLE3: with EAGLE it captures no aux states, the "
                "EAGLE-3 drafter's fc is skipped and the accept length drops to 1.0. (vLLM: speculative method "
                "eagle3 with the drafter's eagle_aux_hidden_state_layer_ids.)")
    plain = flags.eagle or "plain EAGLE"
    return (f"Serve with {flags.eagle3} (the aux layer ids: {flags.aux_ids}); under {plain}, {flags.name} feeds "
            "the final state only, the EAGLE-3 drafter's fc is skipped and the accept length drops to 1.0.")


def aux_on_fix(serve: Provenance) -> str:
    """One H-wide state that is not the final one, where training used several."""
    flags = _serving(serve)
    if flags is None:
        return "Turn on aux capture with the training layer ids (SGLang: --speculative-algorithm EAGLE3)."
    return f"Turn on aux capture with the training layer ids: {flags.eagle3}, the ids in {flags.aux_ids}."


def eagle_fix(serve: Provenance) -> str:
    """An EAGLE-1/2 drafter (trained on the final state) served the aux concat."""
    flags = _serving(serve)
    how = flags.eagle if flags is not None and flags.eagle else "--speculative-algorithm EAGLE"
    return f"The drafter was trained as EAGLE-1/2 on the final state: serve it with {how}, or train an EAGLE-3 drafter on aux states."


def missing_tap_fix(serve: Provenance, missing: list[str], num_layers: int) -> str:
    """Some trained taps were never captured."""
    flags = _serving(serve)
    gone = ", ".join(missing)
    if flags is None:
        return (f"Give the engine every layer id training used: {gone} is missing (vLLM: deepseek_v2 "
                "captures id N only since PR #46973; SGLang captures HF[1]..HF[N-1] only).")
    if system_of(serve) in FIXED_TAPS:
        return fixed_taps_fix(system_of(serve), num_layers)
    final = f"; the final layer: {flags.final_layer}" if f"HF[{num_layers}]" in gone else ""
    return f"Give {flags.name} every layer id training used ({flags.aux_ids}): {gone} is missing{final}."


def train_ids_fix(train: Provenance) -> str:
    """A training set's layer ids were read wrongly (its states are other layers than it claims): name the
    ids it was made with, and where its own system set them."""
    flags = SYSTEM_FLAGS.get(system_of(train))
    where = f" ({flags.name} set them in {flags.aux_ids}; {flags.numbering})" if flags is not None else ""
    return ("The train dump's layer ids were read wrongly: name the ids it was made with (compare "
            f"--train-layer-ids, import --layer-ids or --drafter-config){where}.")
