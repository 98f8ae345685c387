"""The facts a foreign dump does not hold: which layer ids its run used, and the target's layer count.

Layer ids come from the user, or from a drafter config. The keys read (checked in the sources):
- ``eagle_config.eagle_aux_hidden_state_layer_ids``: SpecForge drafter configs
  (configs/deepseek-v3-671b-eagle3.json ships [1, 29, 57]; read by
  specforge/algorithms/model_providers.py::resolve_eagle_capture_layers, SpecForge a6b6b02).
- ``eagle_aux_hidden_state_layer_ids`` at the top level: speculators' Eagle3SpeculatorConfig
  (src/speculators/models/eagle3/config.py, c05b95b) and the vLLM hf_config override that
  speculators' scripts/launch_vllm.py passes.
The layer count N comes from the user or the target model's config.json (``num_hidden_layers``,
under ``text_config`` for multimodal wrappers). A drafter config's own ``num_hidden_layers`` is the
drafter's (1 for EAGLE-3), never the target's, so it is not read.
"""

from __future__ import annotations

import os
from typing import Sequence

from alignprobe.errors import BadInput
from alignprobe.safe_json import load_json_file

CONFIG_PATHS = (("eagle_config", "eagle_aux_hidden_state_layer_ids"), ("eagle_aux_hidden_state_layer_ids",))


def parse_ids(text: str, what: str = "--layer-ids") -> list[int]:
    try:
        ids = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise BadInput(f"{what} {text!r}: give comma-separated integers like 1,29,57") from None
    if not ids:
        raise BadInput(f"{what} is empty: give comma-separated integers like 1,29,57")
    return ids


def layer_ids_from_config(path: str | os.PathLike) -> tuple[list[int], str]:
    """``(ids, key)`` from a drafter config JSON (or a folder holding config.json)."""
    raw = _read_json(path)
    for keys in CONFIG_PATHS:
        value = raw
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        if value is not None:
            where = ".".join(keys)
            if not isinstance(value, list) or not value or not all(isinstance(i, int) and i >= 0 for i in value):
                raise BadInput(f"{path}: {where} is {value!r}, expected a list of non-negative layer ids")
            return list(value), where
    raise BadInput(
        f"{path}: no eagle_config.eagle_aux_hidden_state_layer_ids or eagle_aux_hidden_state_layer_ids; "
        "give the ids with --layer-ids instead"
    )


def num_layers_from_config(path: str | os.PathLike) -> int:
    """N of the target model, from its config.json (or the model folder)."""
    raw = _read_json(path)
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


def _read_json(path: str | os.PathLike) -> dict:
    path = os.fspath(path)
    if os.path.isdir(path):
        path = os.path.join(path, "config.json")
    raw = load_json_file(path, "config file")
    if not isinstance(raw, dict):
        raise BadInput(f"{path}: a config is a JSON object, got {type(raw).__name__}")
    return raw
