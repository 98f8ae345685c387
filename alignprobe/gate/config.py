"""What ``alignprobe gate`` runs: one small TOML file (or the same keys as flags).

    out = "alignprobe-gate"          # train.h5, serve.h5, result.json, junit.xml, report/ go here
    strict = false                   # true: a WARN fails the gate too
    junit = "alignprobe-gate/junit.xml"   # (the default: <out>/junit.xml)

    [train]                          # capture hf: the training extractor's view
    model = "/models/target"
    prompts = "prompts.jsonl"
    dtype = "bf16"

    [serve]                          # exactly one of the five sources
    sglang_url = "http://127.0.0.1:30000"
    # sglang_offline_model = "/models/target"         sglang.Engine run offline by the gate
    #     + engine_python = "/venvs/sglang/bin/python" and engine_args = { device = "cpu" }
    # vllm_dir = "/shared/hs"                         files the connector already wrote
    # vllm_url = "http://127.0.0.1:8000"  + vllm_model = "target"
    # vllm_offline_model = "/models/target" + vllm_storage_dir = "/tmp/hs"
    #     + engine_python = "/venvs/vllm/bin/python" (vLLM's venv) and engine_args = { enforce_eager = true }
    layer_ids = [1, 29, 57]          # the drafter's ids (required for vLLM)

    [policy]                         # tolerances (docs/policy.md), as --set
    drift_fail_rel_rms = 0.1

Relative paths in the file are relative to the file's folder, so a config committed beside the
prompts works from any working directory. ``--out`` moves the file's json and junit paths with it
when they lie in the file's out folder (:meth:`GateConfig.moved_to`).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from alignprobe.errors import BadInput
from alignprobe.layer_ids import parse_layer_list

SERVE_SOURCES = ("sglang_url", "sglang_offline_model", "vllm_dir", "vllm_url", "vllm_offline_model")
ENGINE_SOURCES = ("sglang_offline_model", "vllm_offline_model")  # the gate starts the engine: engine_python, engine_args


@dataclasses.dataclass
class TrainSide:
    model: str = ""
    prompts: str = ""
    dtype: str = "bf16"
    device: str = "cpu"
    layers: str = "all"
    aux_layers: str | None = None
    batch_size: int = 8
    limit: int | None = None
    trust_remote_code: bool = False


@dataclasses.dataclass
class ServeSide:
    sglang_url: str | None = None
    sglang_offline_model: str | None = None
    vllm_dir: str | None = None
    vllm_url: str | None = None
    vllm_model: str | None = None
    vllm_offline_model: str | None = None
    vllm_storage_dir: str | None = None
    engine_python: str | None = None  # *_offline_model: the Python of the engine's venv [default: this one]
    # *_offline_model: keywords of vllm.LLM or sglang.Engine
    engine_args: dict[str, Any] = dataclasses.field(default_factory=dict)
    layer_ids: list[int] | None = None
    num_layers: int | None = None
    hidden_size: int | None = None
    arch: str | None = None
    timeout: float = 120.0
    retries: int = 3

    @property
    def source(self) -> str:
        given = [name for name in SERVE_SOURCES if getattr(self, name)]
        if len(given) != 1:
            raise BadInput("gate: give exactly one serve source: " + ", ".join(SERVE_SOURCES)
                           + (f" (got {', '.join(given)})" if given else ""))
        return given[0]


@dataclasses.dataclass
class GateConfig:
    train: TrainSide = dataclasses.field(default_factory=TrainSide)
    serve: ServeSide = dataclasses.field(default_factory=ServeSide)
    out: str = "alignprobe-gate"
    strict: bool = False
    junit: str | None = None  # default: <out>/junit.xml
    json: str | None = None  # default: <out>/result.json
    policy: dict[str, Any] = dataclasses.field(default_factory=dict)  # overrides, as --set
    policy_file: str | None = None
    sample: int | None = None
    max_tokens: int | None = None

    def validate(self) -> "GateConfig":
        missing = [f"train.{k}" for k in ("model", "prompts") if not getattr(self.train, k)]
        if missing:
            raise BadInput(f"gate: {' and '.join(missing)} missing: the model folder and the prompts JSONL "
                           "to capture the training side from (--model, --prompts or the config's [train])")
        source = self.serve.source
        ids = self.serve.layer_ids
        if ids is not None and (not isinstance(ids, list) or not all(isinstance(i, int) for i in ids)):
            raise BadInput(f"gate: serve layer_ids must be a list of integers, e.g. [1, 29, 57]; got {ids!r}")
        if source.startswith("vllm") and not self.serve.layer_ids:
            raise BadInput("gate: a vLLM serve side needs layer_ids, the ids vLLM ran with (e.g. [2, 30, 58, 61])")
        if source == "vllm_url" and not self.serve.vllm_model:
            raise BadInput("gate: vllm_url needs vllm_model, the name the server serves the model under")
        if source == "vllm_offline_model" and not self.serve.vllm_storage_dir:
            raise BadInput("gate: vllm_offline_model needs vllm_storage_dir, where vLLM writes its files")
        if source not in ENGINE_SOURCES and (self.serve.engine_python or self.serve.engine_args):
            raise BadInput(f"gate: engine_python and engine_args go with {' or '.join(ENGINE_SOURCES)} "
                           "(the engine the gate runs)")
        return self

    def moved_to(self, out: str) -> "GateConfig":
        """This config writing into ``out`` instead: a json or junit path inside the old out folder moves
        with it (``--out`` on the command line must not leave the JUnit file in the config's folder)."""
        old = os.path.abspath(self.out)

        def follow(path: str | None) -> str | None:
            if not path or path == "-":
                return path
            relative = os.path.relpath(os.path.abspath(path), old)
            return path if relative == os.pardir or relative.startswith(os.pardir + os.sep) else os.path.join(out, relative)

        return dataclasses.replace(self, out=out, json=follow(self.json), junit=follow(self.junit))


def load_config(path: str | os.PathLike) -> GateConfig:
    """Read a gate TOML file; relative paths are taken from the file's folder."""
    from alignprobe.safe_json import loads_toml
    from alignprobe.safe_paths import read_input_bytes

    path = os.fspath(path)
    # the one reader of outside text: not UTF-8, nested too deeply, nan or inf are one line each
    raw = loads_toml(read_input_bytes(path, "gate config"), path)
    base = os.path.dirname(os.path.abspath(path))
    return config_from_dict(raw, base, where=path)


def config_from_dict(raw: dict[str, Any], base: str | None = None, where: str = "gate config") -> GateConfig:
    raw = dict(raw)
    train = _section(TrainSide, raw.pop("train", {}), "train", where)
    serve = _section(ServeSide, raw.pop("serve", {}), "serve", where)
    policy = raw.pop("policy", {})
    if not isinstance(policy, dict):
        raise BadInput(f"{where}: [policy] must be a table of tolerances")
    top = _section(GateConfig, raw, "", where, skip=("train", "serve", "policy"))
    config = dataclasses.replace(top, train=train, serve=serve, policy=policy)
    if base:
        for holder, names in ((config.train, ("model", "prompts")),
                              (config.serve, ("sglang_offline_model", "vllm_dir", "vllm_offline_model", "vllm_storage_dir",
                                               "engine_python")),
                              (config, ("out", "junit", "json", "policy_file"))):
            for name in names:
                value = getattr(holder, name)
                if value and value != "-" and not os.path.isabs(value):
                    setattr(holder, name, os.path.join(base, value))
    return config


def _section(cls, raw: Any, name: str, where: str, skip: tuple[str, ...] = ()):
    if not isinstance(raw, dict):
        raise BadInput(f"{where}: [{name}] must be a table")
    known = {f.name for f in dataclasses.fields(cls)} - set(skip)
    unknown = sorted(set(raw) - known)
    if unknown:
        label = f"[{name}]" if name else "the top level"
        raise BadInput(f"{where}: unknown key(s) {', '.join(unknown)} in {label}; known: {', '.join(sorted(known))}")
    for key, value in raw.items():
        _check_type(cls, key, value, name, where)
    return cls(**raw)


# What TOML may hold for each kind of field (the annotations are strings: `from __future__ import annotations`).
# A path given as a number or a list reached os.path as it was and ended in an internal error.
_TOML_TYPES = {"str": (str,), "int": (int,), "float": (int, float), "bool": (bool,), "list[int]": (list,),
               "dict[str, Any]": (dict,)}
_LAYER_FIELDS = ("layers", "aux_layers")  # "all", "eagle3", "2,30,58" or [2, 30, 58] (layer_list)


def _check_type(cls, key: str, value: Any, section: str, where: str) -> None:
    annotation = {f.name: f.type for f in dataclasses.fields(cls)}[key]
    kinds = (str, list) if key in _LAYER_FIELDS else _TOML_TYPES[str(annotation).replace(" | None", "")]
    is_bool = isinstance(value, bool)
    if not isinstance(value, kinds) or (is_bool and bool not in kinds):
        wanted = " or ".join({str: "a string", int: "an integer", float: "a number", bool: "true or false",
                              list: "a list", dict: "a table"}[k] for k in kinds)
        label = f"{section}.{key}" if section else key
        raise BadInput(f"{where}: {label} is {value!r}, expected {wanted}")


def layer_list(value: Any, what: str) -> str | list[int] | None:
    """A TOML layer list (``all``, ``eagle3``, ``"2,30,58"`` or ``[2, 30, 58]``), parsed as the CLI parses one."""
    return parse_layer_list(value, f"gate: {what}")
