"""Planted faults: a train dump and serve dumps with one known fault each, from a tiny seeded model.

The train side is what an extractor writes (``capture_hf``: layers, final_prenorm, eagle3_aux,
final). Each serve dump is what an engine would hand the drafter, built from a second capture of
the same prompts at batch size 1 (so even the clean one differs from training by batching
numerics), with one fault planted:

    clean              the EAGLE-3 aux concat, as training used it
    eagle_not_eagle3   H wide: the post-norm final state (SGLang --speculative-algorithm EAGLE)
    offset_plus1       aux taps one layer deeper, claimed as SGLang's +1 on explicit ids says
    offset_minus1      aux taps one layer shallower, claiming the training indices
    wrong_taps         aux taps HF[1], HF[N//2], HF[N-2]: not a constant shift
    final_norm_swap    aux right, plus a final stream holding the PRE-norm state (vLLM layout): passes
    token_shift        every sample lacks its first 2 tokens (a prefix-cache hit)
    scale_50x          aux multiplied by 50
    int4               aux from the model with INT4 weight-only fake quantization (group 128)
    nan_rows           aux with about 1 row in 12 set to NaN

The demo, the notebook and the tests use these; each scenario's expected finding is in EXPECTED.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import shutil
import tempfile
from typing import Callable, Iterable

import numpy as np

from alignprobe.conventions import eagle3_hf_indices, map_layer_ids
from alignprobe.dump import (
    FINAL_NORM_POST,
    FINAL_NORM_PRE,
    ROLE_DRAFTER_INPUT,
    ROLE_FINAL,
    DumpWriter,
    Provenance,
    StreamClaim,
    open_dump,
)
from alignprobe.errors import BadInput

SCENARIOS = (
    "clean",
    "eagle_not_eagle3",
    "offset_plus1",
    "offset_minus1",
    "wrong_taps",
    "final_norm_swap",
    "token_shift",
    "scale_50x",
    "int4",
    "nan_rows",
)

# The finding code each scenario must raise (None: none above info).
EXPECTED = {
    "clean": None,
    "eagle_not_eagle3": "width_mismatch",
    "offset_plus1": "layer_offset",
    "offset_minus1": "layer_offset",
    "wrong_taps": "wrong_taps",
    "final_norm_swap": None,  # the vLLM layout is correct: its pre-norm final pairs with capture hf's pre-norm one
    "token_shift": "token_shift",
    "scale_50x": "scale_mismatch",
    "int4": "numeric_drift",
    "nan_rows": "nonfinite",
}

SHIFT_TOKENS = 2
NAN_EVERY = 12
SCALE = 50.0


@dataclasses.dataclass
class _Serve:
    """How one serve dump is derived from a serve-side capture."""

    source: str  # "bf16" or "int4": which capture it reads
    streams: dict[str, StreamClaim]
    states: Callable[[np.ndarray, np.ndarray, int], dict[str, np.ndarray]]  # (hf [S,N+1,H], prenorm, row0)
    drop_first: int = 0
    fault: str = ""


def scenario_prompts(num_samples: int = 12, seed: int = 1, min_len: int = 24, max_len: int = 96):
    """Prompts of varied length from the seeded synthetic corpus the tiny models were trained on."""
    import torch

    from alignprobe.probes.prompts import Prompt
    from alignprobe.demo.tiny_models import synthetic_corpus

    tokens = synthetic_corpus(num_samples, max_len, seed=seed)
    lengths = torch.linspace(min_len, max_len, num_samples).round().long()
    return [Prompt(f"prompt-{i:03d}", tokens[i, : int(n)].tolist()) for i, n in enumerate(lengths)]


def scenario_model(arch: str = "deepseek_v3", num_layers: int = 8, hidden_size: int = 64, seed: int = 0, train_steps: int = 30,
                   on_step=None):
    """A tiny seeded model of ``arch`` ("deepseek_v3" or "llama"), briefly trained (float32)."""
    from alignprobe.demo.tiny_models import tiny_deepseek_v3, tiny_llama, train_briefly

    builders = {"deepseek_v3": tiny_deepseek_v3, "llama": tiny_llama}
    if arch not in builders:
        raise BadInput(f"unknown scenario architecture {arch!r}: choose one of {', '.join(builders)}")
    model = builders[arch](num_layers=num_layers, hidden_size=hidden_size, seed=seed)
    return train_briefly(model, steps=train_steps, seed=seed, on_step=on_step) if train_steps else model


def build_scenarios(
    out_dir: str | os.PathLike,
    *,
    arch: str = "deepseek_v3",
    names: Iterable[str] | None = None,
    num_layers: int = 8,
    hidden_size: int = 64,
    num_samples: int = 12,
    seed: int = 0,
    train_steps: int = 30,
    dtype: str = "bfloat16",
    model=None,
    overwrite: bool = False,
    step: Callable[[str], None] = lambda done: None,
) -> dict[str, str]:
    """Write ``train.h5`` and one ``<scenario>.h5`` per name into ``out_dir``; returns name -> path.

    ``model``: a float32 model to use instead of building and training the tiny one. ``step`` is
    called after each stage with what was done (:func:`count_steps` says how many there are).
    """
    from alignprobe.probes.hf import capture_hf

    names = list(SCENARIOS if names is None else names)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise BadInput(f"unknown scenario(s) {', '.join(unknown)}: choose from {', '.join(SCENARIOS)}")
    out_dir = os.fspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    if model is None:
        model = scenario_model(arch, num_layers, hidden_size, seed, train_steps, on_step=step)
    n = model.config.num_hidden_layers
    h = model.config.hidden_size
    prompts = scenario_prompts(num_samples, seed + 1)
    about = {"model": f"tiny {arch} (seed {seed}, {n} layers, H={h}, trained {train_steps} steps)"}
    paths = {"train": os.path.join(out_dir, "train.h5")}
    capture_hf(
        copy.deepcopy(model), prompts, paths["train"], batch_size=4, dtype=dtype, overwrite=overwrite,
        progress=False, provenance={**about, "capture": {"scenario": "train", "batch_size": 4}},
    )
    step("train captured")
    specs = {name: _spec(name, n, h, dtype) for name in names}
    scratch = tempfile.mkdtemp(prefix="alignprobe-scenarios-")
    try:
        sources = {}
        for source in sorted({s.source for s in specs.values()}):
            serve_model = copy.deepcopy(model)
            if source == "int4":
                from alignprobe.quant import simulate_weight_quant

                simulate_weight_quant(serve_model, "int4", group_size=128)
            sources[source] = capture_hf(
                serve_model, prompts, os.path.join(scratch, f"{source}.h5"), batch_size=1, dtype=dtype,
                progress=False, provenance=about,
            )
            step(f"{source} captured")
        for name, spec in specs.items():
            paths[name] = os.path.join(out_dir, f"{name}.h5")
            _derive(sources[spec.source], paths[name], spec, name, overwrite)
            step(f"{name} written")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return paths


def count_steps(names: Iterable[str], train_steps: int = 30) -> int:
    """How many times :func:`build_scenarios` calls ``step`` for these scenarios (``train_steps``: 0
    when it is given a model)."""
    names = list(names)
    return train_steps + 1 + len({_spec(name, 8, 64, "bfloat16").source for name in names}) + len(names)


def _spec(name: str, n: int, h: int, dtype: str) -> _Serve:
    aux = eagle3_hf_indices(n)

    def claim(indices, role=ROLE_DRAFTER_INPUT, norm=FINAL_NORM_POST, note=""):
        return StreamClaim(tuple(indices), h, n, dtype, norm, role, note)

    def taps(indices, factor=1.0):
        def states(hf, prenorm, row0):
            return {"hidden_states": (hf[:, list(indices)] * factor).reshape(len(hf), -1)}

        return states

    if name in ("clean", "token_shift", "scale_50x", "int4", "nan_rows"):
        streams = {"hidden_states": claim(aux, note="SGLang EAGLE3 aux capture (simulated)")}
        if name == "scale_50x":
            return _Serve("bf16", streams, taps(aux, SCALE), fault=f"aux states multiplied by {SCALE:g}")
        if name == "token_shift":
            return _Serve("bf16", streams, taps(aux), drop_first=SHIFT_TOKENS,
                          fault=f"first {SHIFT_TOKENS} tokens missing (prefix-cache hit)")
        if name == "nan_rows":
            def with_nans(hf, prenorm, row0):
                out = taps(aux)(hf, prenorm, row0)["hidden_states"]
                rows = np.arange(row0, row0 + len(out)) % NAN_EVERY == NAN_EVERY - 1
                out[rows] = np.nan
                return {"hidden_states": out}

            return _Serve("bf16", streams, with_nans, fault=f"every {NAN_EVERY}th row NaN")
        if name == "int4":
            return _Serve("int4", streams, taps(aux), fault="INT4 weight-only RTN quantization, group 128")
        return _Serve("bf16", streams, taps(aux), fault="none (batch size 1 vs 4)")
    if name == "eagle_not_eagle3":
        streams = {"hidden_states": claim((n,), note="SGLang without aux capture: the final state")}
        return _Serve("bf16", streams, taps((n,)), fault="--speculative-algorithm EAGLE: H-wide post-norm final state")
    if name == "offset_plus1":
        mapped = map_layer_ids("sglang", aux, n, explicit=True)
        streams = {"hidden_states": claim(mapped.hf_indices, note=mapped.rule)}
        return _Serve("bf16", streams, taps(mapped.hf_indices), fault="ids read with SGLang's +1")
    if name == "offset_minus1":
        shifted = tuple(i - 1 for i in aux)
        streams = {"hidden_states": claim(aux, note="claims the training indices")}
        return _Serve("bf16", streams, taps(shifted), fault="taps one layer shallower than claimed")
    if name == "wrong_taps":
        wrong = (1, n // 2, n - 2)
        streams = {"hidden_states": claim(wrong, note="hand-set ids")}
        return _Serve("bf16", streams, taps(wrong), fault=f"taps {wrong} instead of {aux}")
    if name == "final_norm_swap":
        streams = {
            "aux": claim(aux, note="vLLM aux capture (simulated)"),
            "final": claim((n,), ROLE_FINAL, FINAL_NORM_PRE, "vLLM: id N is the pre-norm final state"),
        }

        def vllm(hf, prenorm, row0):
            return {"aux": hf[:, list(aux)].reshape(len(hf), -1), "final": prenorm}

        return _Serve("bf16", streams, vllm, fault="final state stored before the final norm")
    raise BadInput(f"unknown scenario {name!r}")


def _derive(source_path: str, out_path: str, spec: _Serve, name: str, overwrite: bool) -> None:
    """Write a serve dump from a serve-side capture, sample by sample (bounded memory)."""
    if overwrite and os.path.exists(out_path):
        os.remove(out_path)
    with open_dump(source_path) as src:
        claim = src.streams["layers"]
        n, h = claim.num_layers, claim.hidden_size
        if tuple(claim.hf_indices) != tuple(range(n + 1)):
            raise BadInput(f"{source_path}: the serve capture must hold every layer")
        record = dataclasses.asdict(src.provenance)
        record["capture"] = {**record.get("capture", {}), "scenario": name, "fault": spec.fault}
        record["engine"] = "simulated serving engine (alignprobe.demo.scenarios)"
        provenance = Provenance(**record)
        with DumpWriter(out_path, provenance, spec.streams) as writer:
            for i, sid in enumerate(src.sample_ids):
                row0 = int(src.offsets[i])
                hf = src.states(i, "layers").reshape(-1, n + 1, h)
                prenorm = src.states(i, "final_prenorm")
                states = spec.states(hf, prenorm, row0)
                k = spec.drop_first
                writer.add(sid, src.token_ids(i)[k:], {s: v[k:] for s, v in states.items()})
