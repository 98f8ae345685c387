"""How each system numbers the layers it captures, said in HF-index terms.

HF[0] is the embedding output, HF[k] the input of decoder layer k (= output of layer k-1), HF[N] the
output of the final norm. Each rule below was read from the system's public source; the version is
recorded with the rule, and must be re-checked when a system changes (see ../shared/CONVENTIONS.md).
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from alignprobe.dump.schema import FINAL_NORM_POST, FINAL_NORM_PRE
from alignprobe.errors import BadInput


@dataclasses.dataclass(frozen=True)
class LayerMapping:
    """Layer ids as one system was configured with them, and the HF indices they really capture."""

    system: str
    layer_ids: tuple[int, ...]
    hf_indices: tuple[int, ...]
    final_norm: str  # what HF[N] means in a stream this system captured
    rule: str  # the convention applied, in one line, with the source version it was read from


def eagle3_hf_indices(num_layers: int) -> tuple[int, ...]:
    """The HF indices the EAGLE-3 reference trains on: inputs of layers 2, N//2 and N-3."""
    return (2, num_layers // 2, num_layers - 3)


def default_layer_ids(system: str, num_layers: int) -> tuple[int, ...]:
    """The layer ids a system uses when none are configured, in that system's own numbering."""
    n = num_layers
    defaults = {
        "sglang": (2, n // 2, n - 3),
        "specforge": (1, n // 2 - 1, n - 4),
        "vllm": (2, n // 2, n - 3),
        "speculators": (2, n // 2, n - 3, n),
        "eagle3": (2, n // 2, n - 3),
        "hf": (2, n // 2, n - 3),
    }
    return defaults[_known(system)]


def map_layer_ids(
    system: str,
    layer_ids: Sequence[int] | None,
    num_layers: int,
    *,
    arch: str = "llama",
    explicit: bool = True,
) -> LayerMapping:
    """The HF indices that ``layer_ids``, as configured in ``system``, capture.

    ``explicit`` says the ids were set by hand (SGLang adds +1 to those, not to its defaults);
    ``arch`` is the model family for rules that differ by model file (SGLang's deepseek_v2).
    """
    system = _known(system)
    n = num_layers
    if layer_ids is None:
        layer_ids, explicit = default_layer_ids(system, n), False
    ids = tuple(int(i) for i in layer_ids)
    bad = [i for i in ids if not 0 <= i <= n]
    if bad:
        raise BadInput(f"layer ids {bad} are outside 0..{n} for a model of {n} layers")

    if system == "sglang":
        deepseek = arch in ("deepseek_v2", "deepseek_v3", "kimi_k2")
        if explicit and (not deepseek or ids[0] == 1):
            rule = "SGLang 0.5.23: explicit ids k capture the output of layer k = HF[k+1]"
            if deepseek:
                rule = "SGLang 0.5.23 deepseek_v2: first id is 1, so every id k captures HF[k+1]"
            return LayerMapping(system, ids, tuple(min(i + 1, n) for i in ids), FINAL_NORM_POST, rule)
        rule = "SGLang 0.5.23: default ids capture HF[k] (no offset)"
        if explicit:
            rule = "SGLang 0.5.23 deepseek_v2: first id is not 1, so ids capture HF[k] (no offset)"
        return LayerMapping(system, ids, ids, FINAL_NORM_POST, rule)
    if system == "specforge":
        rule = "SpecForge 2026-08: id k is the output of layer k = HF[k+1] (read by SGLang with +1)"
        return LayerMapping(system, ids, tuple(min(i + 1, n) for i in ids), FINAL_NORM_POST, rule)
    if system in ("vllm", "speculators"):
        rule = f"{'speculators (vLLM extract_hidden_states)' if system == 'speculators' else 'vLLM 0.33.0'}: " \
            "id k is the input of layer k = HF[k], no offset; id N is the pre-norm final state"
        return LayerMapping(system, ids, ids, FINAL_NORM_PRE, rule)
    if system == "eagle3":
        return LayerMapping(system, ids, ids, FINAL_NORM_POST, "EAGLE-3 reference: id k is the input of layer k = HF[k]")
    return LayerMapping(system, ids, ids, FINAL_NORM_POST, "HF index as given")


def shift_explanations(shift: int) -> list[str]:
    """Known pairs of conventions that put serving ``shift`` layers from training (serve - train)."""
    if shift == 1:
        return [
            "SGLang adds +1 to explicitly configured layer ids (set_eagle3_layers_to_capture): ids that meant "
            "HF indices (vLLM / EAGLE-3 reference numbering) land one layer deeper",
            "SpecForge ids (output of layer k) were read as HF[k+1] by the engine but training used HF[k]",
        ]
    if shift == -1:
        return [
            "vLLM reads layer ids as HF[k] with no offset: ids written for SGLang/SpecForge (output of "
            "layer k = HF[k+1]) land one layer shallower",
            "SGLang's deepseek_v2 applies +1 only when the first id is 1: a drafter config whose first id "
            "is not 1 is read without the offset",
        ]
    return []


SYSTEMS = ("hf", "eagle3", "sglang", "specforge", "vllm", "speculators")


def _known(system: str) -> str:
    s = system.lower()
    if s not in SYSTEMS:
        raise BadInput(f"unknown system {system!r}: choose one of {', '.join(SYSTEMS)}")
    return s
