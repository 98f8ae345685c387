"""The llama.cpp probe: run a GGUF model through llama-cpp-python and write what llama.cpp computes.

llama.cpp serves EAGLE-3 by reading, for every id k of the drafter GGUF's ``eagle3.target_layers``,
the input of target layer k (``llama_get_embeddings_layer_inp``; id n_layer: the state before the
final norm): conventions.SOURCES["llamacpp"]. The model runs in llama.cpp's own Python through
probes/engine_side/alignprobe_llamacpp_driver.py (which says where each state is read), and the
dump holds:

    layers         role layers         HF[0..N-1], the input of every layer (``layers="all"``)
    final_prenorm  role layers         HF[N] before the final norm (the graph's ``l_out-{N-1}``)
    final          role final          HF[N] after it (``llama_get_embeddings``, ``result_norm``)
    aux            role drafter_input  with ``layer_ids``: the concat the drafter's fc reads, id k = HF[k]

The aux stream is what llama.cpp's EAGLE-3 code reads, slice by slice: for id n_layer that is
``llama_get_embeddings_nextn``, which on a Llama target is zeros (the driver's docstring says why),
not the pre-norm final kept in ``final_prenorm``: compare then names the slice, where a drafter
trained on the pre-norm final would silently get nothing.

``layers="aux"`` keeps only the inputs the aux ids need (a large model's every layer is N x H floats
a token). llama.cpp computes activations in float32 whatever the weights' type, so every stream is
float32; the GGUF's file type (F32, F16, Q8_0, ...) is recorded as its quantization, and the KV
cache's type and flash attention (llama.cpp's defaults: f16, auto) in the capture settings. With an
F32 GGUF they set the distance to an fp32 transformers capture; measured on the tiny 8-layer Llama of
the engine tests (llama-cpp-python 0.3.36, CPU), the rel-RMS of HF[1]..HF[8]:

    f16 cache, flash attention auto (= on)   1.9e-4 .. 7.6e-5   (on ignores the cache type: same with f32)
    f16 cache, flash attention off           1.2e-4 .. 2.0e-5
    f32 cache, flash attention off           1.8e-7 .. 9.8e-8   (float32 round-off)
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any, Mapping, Sequence

import numpy as np

from alignprobe.conventions import map_layer_ids
from alignprobe.dump import DumpWriter, Provenance, StreamClaim
from alignprobe.dump.schema import FINAL_NORM_POST, FINAL_NORM_PRE, ROLE_DRAFTER_INPUT, ROLE_FINAL, ROLE_LAYERS
from alignprobe.errors import BadInput
from alignprobe.engine_errors import EngineFailed
from alignprobe.probes.engine_process import DEFAULT_TIMEOUT_S, check_engine_python, run_driver
from alignprobe.probes.engine_side import LLAMACPP_DRIVER
# the engine-side driver imports llama_cpp only inside run(): its table of cache types is shared from here
from alignprobe.probes.engine_side.alignprobe_llamacpp_driver import CACHE_TYPES, FLASH_ATTN
from alignprobe.probes.progress import progress_bar
from alignprobe.probes.prompts import Prompt

ENGINE = "llama.cpp"
LAYER_CHOICES = ("all", "aux")
# general.file_type of a GGUF (gguf-py constants.LlamaFileType): the ones a capture is likely to meet
FILE_TYPES = {"0": "F32", "1": "F16", "7": "Q8_0", "32": "BF16", "2": "Q4_0", "15": "Q4_K_M", "17": "Q5_K_M", "18": "Q6_K"}


def stream_claims(num_layers: int, hidden_size: int, layer_ids: Sequence[int] | None,
                  layers: str = "all") -> dict[str, StreamClaim]:
    """The streams of a llama.cpp capture (module doc); ``layer_ids`` in llama.cpp's numbering."""
    n, h, dtype = num_layers, hidden_size, "float32"
    streams: dict[str, StreamClaim] = {}
    if layers == "all":
        streams["layers"] = StreamClaim(tuple(range(n)), h, n, dtype, FINAL_NORM_PRE, ROLE_LAYERS,
                                        "llama_get_embeddings_layer_inp(il): the input of layer il")
    streams["final_prenorm"] = StreamClaim((n,), h, n, dtype, FINAL_NORM_PRE, ROLE_LAYERS,
                                           f"graph tensor l_out-{n - 1} (eval callback): before the final norm")
    streams["final"] = StreamClaim((n,), h, n, dtype, FINAL_NORM_POST, ROLE_FINAL,
                                   "llama_get_embeddings (result_norm): after the final norm")
    if layer_ids:
        mapping = map_layer_ids("llamacpp", layer_ids, n)
        note = f"llama.cpp eagle3.target_layers {list(mapping.layer_ids)}: {mapping.rule}"
        if n in mapping.layer_ids:
            note += f"; id {n} as EAGLE-3 reads it, llama_get_embeddings_nextn"
        streams["aux"] = StreamClaim(mapping.hf_indices, h, n, dtype, FINAL_NORM_PRE, ROLE_DRAFTER_INPUT, note)
    return streams


def capture_llamacpp(
    model_path: str | os.PathLike,
    prompts: Sequence[Prompt],
    out_path: str | os.PathLike,
    *,
    layer_ids: Sequence[int] | None = None,
    layers: str = "all",
    python: str | None = None,
    threads: int | None = None,
    cache_type: str = "f16",
    flash_attn: str = "auto",
    drafter: str | os.PathLike | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    provenance: Mapping[str, Any] | None = None,
) -> str:
    """Run ``prompts`` through the GGUF at ``model_path`` in llama.cpp (``python``: its venv) into a dump.

    ``layer_ids``: the drafter's ``eagle3.target_layers`` (llama.cpp numbering: id k = HF[k], id
    n_layer = the pre-norm final), written as the ``aux`` stream; ``layers``: ``all`` keeps every
    layer's input as well, ``aux`` only the aux ids' (module doc). ``threads``: llama.cpp's CPU threads.
    ``cache_type``: the KV cache's element type, llama.cpp's default f16 (what llama-server runs with
    unless --cache-type-k/-v say otherwise), or f32, bf16, q8_0. ``flash_attn``: auto (llama.cpp's
    default: on where the backend has it, as the CPU does), on or off. ``drafter``: instead of
    ``layer_ids``, an EAGLE-3 drafter GGUF whose ids (and their width, checked against the target's)
    llama.cpp reads itself, as it does when it serves the pair.
    """
    if drafter is not None and layer_ids:
        raise BadInput("give --drafter or --layer-ids, not both: the drafter GGUF says which layers it reads")
    if cache_type not in CACHE_TYPES:
        raise BadInput(f"cache type {cache_type!r}: give {', '.join(CACHE_TYPES)}")
    if flash_attn not in FLASH_ATTN:
        raise BadInput(f"flash attention {flash_attn!r}: give {', '.join(FLASH_ATTN)}")
    if layers not in LAYER_CHOICES:
        raise BadInput(f"layers {layers!r}: give {' or '.join(LAYER_CHOICES)}")
    if layers == "aux" and not layer_ids and drafter is None:
        raise BadInput("--layers aux keeps only the drafter's taps: give them with --layer-ids or --drafter")
    if layer_ids is not None and len(set(layer_ids)) != len(layer_ids):
        raise BadInput(f"layer ids {list(layer_ids)} repeat an id")
    prompts = list(prompts)
    if not prompts or any(not p.token_ids for p in prompts):
        raise BadInput("no prompts to capture" if not prompts else "a prompt has no tokens")
    python = check_engine_python("llama.cpp", python, "llama_cpp")
    work = tempfile.mkdtemp(prefix="alignprobe-llamacpp-")  # kept when the engine fails: its log is there
    request = {"model": os.path.abspath(os.fspath(model_path)), "prompts": [list(map(int, p.token_ids)) for p in prompts],
               "layer_inputs": "all" if layers == "all" else "aux", "aux_ids": [int(i) for i in layer_ids or ()],
               "out_dir": os.path.join(work, "rows"), "threads": threads, "cache_type": cache_type,
               "flash_attn": flash_attn, "drafter": os.path.abspath(os.fspath(drafter)) if drafter else None}
    os.makedirs(request["out_dir"])
    result = run_driver("llama.cpp", python, LLAMACPP_DRIVER, request, work, timeout_s=timeout_s)
    try:
        if drafter is not None:
            layer_ids = list((result.get("drafter") or {}).get("layer_ids") or ())
        return _write(result, prompts, out_path, layer_ids, layers, request, resume, overwrite, progress, provenance)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _write(result, prompts, out_path, layer_ids, layers, request, resume, overwrite, progress, given) -> str:
    n, h = int(result["n_layer"]), int(result["n_embd"])
    files = list(result.get("files") or [])
    if len(files) != len(prompts):
        raise EngineFailed(f"llama.cpp answered {len(files)} of {len(prompts)} prompts")
    if layer_ids:
        bad = [i for i in layer_ids if not 0 <= int(i) <= n]
        if bad:
            raise BadInput(f"layer ids {bad} are outside 0..{n}: llama.cpp reads id k < {n} as the input of "
                           f"layer k and id {n} as the state before the final norm")
    streams = stream_claims(n, h, layer_ids, layers)
    kept = list(result.get("layer_inputs") or [])
    record = _provenance(result, request, streams, given)
    with DumpWriter(out_path, record, streams, resume=resume, overwrite=overwrite) as writer:
        todo = [(p, f) for p, f in zip(prompts, files) if p.sample_id not in writer.done_ids]
        bar = progress_bar(len(prompts), len(prompts) - len(todo), progress, unit="prompt", desc="capture llamacpp")
        try:
            for prompt, path in todo:
                states = _read(path, prompt, kept, h, n in (layer_ids or ()))
                writer.add(prompt.sample_id, prompt.token_ids, _streams_of(states, streams, kept, n))
                bar.update(1)
        finally:
            bar.close()
    return os.fspath(out_path)


def _read(path: str, prompt: Prompt, kept: list[int], h: int, nextn: bool) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as data:
        states = {key: data[key] for key in ("layer_inputs", "prenorm", "postnorm", "nextn", "token_ids")}
    s = len(prompt.token_ids)
    if [int(t) for t in states["token_ids"]] != [int(t) for t in prompt.token_ids]:
        raise EngineFailed(f"llama.cpp's rows for sample {prompt.sample_id!r} are of other tokens")
    want = {"layer_inputs": (s, len(kept), h), "prenorm": (s, h), "postnorm": (s, h),
            "nextn": (s if nextn else 0, h)}
    for key, shape in want.items():
        if states[key].shape != shape or states[key].dtype != np.float32:
            raise EngineFailed(f"llama.cpp gave {key} {states[key].shape} {states[key].dtype} for sample "
                               f"{prompt.sample_id!r}, expected {shape} float32")
    return states


def _streams_of(states, streams: Mapping[str, StreamClaim], kept: list[int], n: int) -> dict[str, np.ndarray]:
    def slice_of(hf: int, stream: str) -> np.ndarray:
        if hf == n:  # the drafter's id n_layer is what EAGLE-3 reads for it (module doc)
            return states["nextn"] if stream == "aux" else states["prenorm"]
        return states["layer_inputs"][:, kept.index(hf), :]

    out = {}
    for name, claim in streams.items():
        if name == "final":
            out[name] = states["postnorm"]
        else:
            out[name] = np.concatenate([slice_of(hf, name) for hf in claim.hf_indices], axis=1)
    return out


def layer_ids_of(result, request) -> list[int]:
    return list((result.get("drafter") or {}).get("layer_ids") or request["aux_ids"])


def _provenance(result, request, streams, given) -> Provenance:
    file_type = str(result.get("file_type", ""))
    name = FILE_TYPES.get(file_type, f"GGUF file type {file_type}" if file_type else "")
    capture = {
        "gguf": request["model"],
        "architecture": result.get("architecture", ""),
        "description": result.get("description", ""),
        "layer_ids": list(layer_ids_of(result, request)),
        "drafter": result.get("drafter") and {"gguf": request["drafter"], **result["drafter"]},
        "layers": request["layer_inputs"],
        "streams": {stream: list(c.hf_indices) for stream, c in streams.items()},
        "threads": request["threads"],
        "kv_cache_type": request["cache_type"],
        "flash_attn": request["flash_attn"],
        "engine_start_s": round(float(result.get("start_s", 0.0)), 3),
        "engine_decode_s": round(float(result.get("decode_s", 0.0)), 3),
        "convention": "llama.cpp: id k = HF[k] (the input of layer k); id n_layer = the state before the final norm",
    }
    fields: dict[str, Any] = {
        "engine": ENGINE,
        "engine_version": f"llama-cpp-python {result.get('bindings_version', '?')}",
        "model": request["model"],
        "dtype": "float32",
        "quantization": "" if name == "F32" else name,
    }
    return Provenance.for_capture(capture, given, **fields)
