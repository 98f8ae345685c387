"""The training-extractor probe: capture hidden states with transformers, as an extractor would.

A dump from :func:`capture_hf` holds these streams (the contract in ../prompts/contract.md):

    layers         role layers         the selected HF indices (default all N+1), HF[N] post-norm
    final_prenorm  role layers         HF[N] before the final norm (what vLLM / speculators store)
    eagle3_aux     role drafter_input  the aux concat an EAGLE-3 drafter trains on, default HF[2, N//2, N-3]
    final          role final          HF[N] post-norm (what SpecForge stores as ``hidden_state``)

What each ``layers`` setting writes, for a model of N layers:

    all (default)      layers (HF[0..N]), final_prenorm, eagle3_aux, final: N+6 slices of H a token
    eagle3             final_prenorm, eagle3_aux, final: 5 slices (3 of them aux). The selected
                       layers are the aux layers, so ``layers`` would hold ``eagle3_aux``'s bytes
                       again and is not written; the eagle3_aux claim's note says so, and the
                       provenance's ``capture.layers`` lists the selection. Any selection equal to
                       the aux layers (same indices, same order) is written this way.
    other HF indices   all four streams

Readers lose nothing: the comparer takes its mapping candidates from every train stream and pairs
a serve ``layers`` slice with the train slice of the same HF index in any stream.

Prompts are batched with padding; every sample's states are cut out of its own row at its own
positions, so no pad position ever reaches the dump (tests check a padded batch against each
sample run alone). Conventions read from transformers 5.24 (see probes/hf_states.py).
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, Mapping, Sequence

import torch

from alignprobe.probes.offload import StateOffloader
from alignprobe.probes.progress import progress_bar
from alignprobe.conventions import eagle3_hf_indices
from alignprobe.dump import Provenance, StreamClaim
from alignprobe.dump.planned_writer import PlannedDumpWriter
from alignprobe.dump.encoding import TORCH_DTYPE, dtype_name
from alignprobe.dump.schema import FINAL_NORM_POST, FINAL_NORM_PRE, ROLE_DRAFTER_INPUT, ROLE_FINAL, ROLE_LAYERS
from alignprobe.dump.writer import DEFAULT_SHARD_TOKENS
from alignprobe.devices import checked_device
from alignprobe.engine_errors import engine_failure
from alignprobe.errors import BadInput
from alignprobe.probes.hf_states import forward_states
from alignprobe.probes.prompts import Prompt

ENGINE = "transformers"
PADDING_SIDES = ("right", "left")
DTYPE_ALIASES = {"bf16": "bfloat16", "fp16": "float16", "half": "float16", "fp32": "float32", "float": "float32"}


@dataclasses.dataclass(frozen=True)
class ModelShape:
    num_layers: int  # N
    hidden_size: int  # H
    vocab_size: int
    max_positions: int | None  # the longest sequence the model's positions cover, where it says


def model_shape(model) -> ModelShape:
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    max_positions = getattr(config, "max_position_embeddings", None)
    return ModelShape(int(config.num_hidden_layers), int(config.hidden_size), int(config.vocab_size),
                      int(max_positions) if isinstance(max_positions, int) else None)


def parse_dtype(dtype: str | torch.dtype | None) -> torch.dtype | None:
    """``"bf16"``, ``"bfloat16"`` or ``torch.bfloat16`` -> ``torch.bfloat16``; None stays None."""
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    name = DTYPE_ALIASES.get(dtype.lower(), dtype.lower())
    if name not in TORCH_DTYPE:
        raise BadInput(f"dtype {dtype!r} is not one of bf16, fp16, fp32")
    return TORCH_DTYPE[name]


def resolve_layers(layers: str | Sequence[int] | None, num_layers: int, what: str = "layers") -> tuple[int, ...]:
    """``None``/``"all"`` -> 0..N, ``"eagle3"`` -> (2, N//2, N-3), or a list of HF indices, checked."""
    if layers is None or (isinstance(layers, str) and layers.lower() == "all"):
        return tuple(range(num_layers + 1))
    if isinstance(layers, str) and layers.lower() == "eagle3":
        default = eagle3_hf_indices(num_layers)
        if not all(0 <= i <= num_layers for i in default):  # a model of 1 or 2 layers has no such three
            raise BadInput(f"{what}: EAGLE-3's default HF[2, N//2, N-3] is {list(default)} for a model of {num_layers} "
                           "layers, outside it; give the HF indices with --aux-layers")
        return default
    if isinstance(layers, str):
        raise BadInput(f"{what}: {layers!r} is not 'all', 'eagle3' or a list of HF indices")
    indices = tuple(int(i) for i in layers)
    if not indices:
        raise BadInput(f"{what}: choose at least one HF index")
    bad = [i for i in indices if not 0 <= i <= num_layers]
    if bad:
        raise BadInput(f"{what}: HF indices {bad} are outside 0..{num_layers} (the model has {num_layers} layers)")
    if len(set(indices)) != len(indices):
        raise BadInput(f"{what}: HF indices {list(indices)} repeat an index")
    return indices


def stream_claims(shape: ModelShape, layers: tuple[int, ...], aux: tuple[int, ...], dtype: str,
                  aux_final_norm: str = FINAL_NORM_POST) -> dict[str, StreamClaim]:
    """The streams a capture writes: ``layers`` only where it is not ``eagle3_aux`` again (module docstring).
    ``aux_final_norm``: HF[N] among the aux layers after the final norm (post) or before it (pre)."""
    if aux_final_norm not in (FINAL_NORM_POST, FINAL_NORM_PRE):
        raise BadInput(f"aux final norm {aux_final_norm!r}: give post or pre")
    n, h = shape.num_layers, shape.hidden_size
    aux_note = "EAGLE-3 training view: concat of the aux HF indices"
    if n in aux and aux_final_norm == FINAL_NORM_PRE:
        aux_note += f"; HF[{n}] before the final norm (vLLM's id {n})"
    streams = {}
    if tuple(layers) != tuple(aux) or (n in aux and aux_final_norm == FINAL_NORM_PRE):
        streams["layers"] = StreamClaim(
            layers, h, n, dtype, FINAL_NORM_POST, ROLE_LAYERS, "transformers output_hidden_states"
        )
    else:
        aux_note += "; also the selected layers, so no separate layers stream was written"
    streams["final_prenorm"] = StreamClaim(
        (n,), h, n, dtype, FINAL_NORM_PRE, ROLE_LAYERS, "input of the final norm (forward hook)"
    )
    streams["eagle3_aux"] = StreamClaim(aux, h, n, dtype, aux_final_norm, ROLE_DRAFTER_INPUT, aux_note)
    streams["final"] = StreamClaim((n,), h, n, dtype, FINAL_NORM_POST, ROLE_FINAL, "HF[N], output of the final norm")
    return streams


def capture_hf(
    model,
    prompts: Sequence[Prompt],
    out_path: str | os.PathLike,
    *,
    layers: str | Sequence[int] | None = None,
    aux_layers: Sequence[int] | None = None,
    aux_final_norm: str = FINAL_NORM_POST,
    batch_size: int = 8,
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    provenance: Provenance | Mapping[str, Any] | None = None,
    padding_side: str = "right",
    shard_tokens: int = DEFAULT_SHARD_TOKENS,
    flush_seconds: float = 30.0,
) -> str:
    """Capture ``prompts`` through ``model`` into the dump ``out_path``; returns its path.

    ``layers``: ``"all"`` (default), ``"eagle3"`` or HF indices. ``aux_layers``: the HF indices of
    the EAGLE-3 training view (default ``eagle3_hf_indices(N)``); ``aux_final_norm``: HF[N] among them
    after the final norm ("post", transformers' HF[N]) or before it ("pre", vLLM's id N). A selection equal to the aux layers
    (``"eagle3"`` with the default aux layers) writes no ``layers`` stream: ``eagle3_aux`` holds it.
    ``resume`` continues an interrupted capture, skipping samples already written. ``provenance``: a
    Provenance to start from, or a dict of Provenance fields (its ``capture`` dict is merged into ours).
    ``shard_tokens`` / ``flush_seconds``: written samples are made durable after this many tokens or seconds,
    whichever comes first: the most an abrupt kill (kill -9, a lost node) can lose.
    ``padding_side``: right (default) or left; both keep pad positions out of every sample. Measured
    on an H200 in bf16 (tiny Llama and DeepseekV3, 24 prompts of 1-200 tokens, batch 12): right
    padding gave states bit-identical to each sample run alone; left padding differed by bf16
    rounding (other kernel tiling), up to 1.4% (Llama) and 17% (DeepseekV3, expert routing flips)
    of a sample's largest value. In fp32 both stayed within 1e-6 relative.
    """
    if padding_side not in PADDING_SIDES:
        raise BadInput(f"padding side {padding_side!r} is not one of {PADDING_SIDES}")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise BadInput(f"batch size must be a positive integer, got {batch_size!r}")
    torch_dtype = parse_dtype(dtype)
    if (device is not None or torch_dtype is not None) and getattr(model, "hf_device_map", None):
        raise BadInput("the model is placed by a device map: load it with the device and dtype wanted instead")
    if device is not None or torch_dtype is not None:
        model = model.to(device=device, dtype=torch_dtype)
    model.eval()
    shape = model_shape(model)
    selected = resolve_layers(layers, shape.num_layers)
    aux = resolve_layers(aux_layers if aux_layers is not None else "eagle3", shape.num_layers, "aux layers")
    prompts = _checked(prompts, shape)
    stored_dtype = dtype_name(next(model.parameters()))
    streams = stream_claims(shape, selected, aux, stored_dtype, aux_final_norm)
    record = _provenance(model, provenance, selected, aux, batch_size, padding_side, stored_dtype)
    model_device = input_device(model)
    keep = sorted({k for claim in streams.values() for k in claim.hf_indices})

    # Every prompt's length is known, so the dump is laid out at once and written in place (no merge).
    # The plan is the order batches are captured in, so a batch's samples are adjacent rows of the
    # file and each stream of a batch goes out in one write (a resumed capture's batches skip the
    # samples already written: a few writes then).
    plan = [(p.sample_id, len(p.token_ids)) for p in prompts]
    with PlannedDumpWriter(
        out_path, record, streams, plan, resume=resume, overwrite=overwrite, flush_tokens=shard_tokens
    ) as writer:
        todo = [p for p in prompts if p.sample_id not in writer.done_ids]
        bar = progress_bar(len(prompts), len(prompts) - len(todo), progress, unit="prompt", desc="capture hf")
        last_flush = [time.monotonic()]

        def write_batch(rows, states: dict[str, torch.Tensor]) -> None:
            # Runs on the offloader's thread, batches in order: the only place the writer is used.
            # The host tensors are written from where they lie; add_batch returns once they are in
            # the file, and only then may the pinned memory go back to torch's cache for reuse.
            batch = [prompt for prompt, _ in rows]
            writer.add_batch([p.sample_id for p in batch], [p.token_ids for p in batch], states,
                             [span for _, span in rows])
            bar.update(len(rows))
            if time.monotonic() - last_flush[0] >= flush_seconds:
                writer.flush()
                last_flush[0] = time.monotonic()

        try:
            # States leave the GPU on a side stream while the next batch runs (probes/offload.py);
            # on an error the batches already submitted are still written, for --resume.
            with StateOffloader(write_batch) as offloader:
                for start in range(0, len(todo), batch_size):
                    batch = todo[start : start + batch_size]
                    input_ids, attention_mask, position_ids, spans = pad_batch(
                        [p.token_ids for p in batch], padding_side, model_device, _pad_id(model)
                    )
                    try:
                        fs = forward_states(model, input_ids, attention_mask, position_ids, keep=keep)
                        states = batch_streams(fs, streams)
                    except torch.OutOfMemoryError:
                        raise BadInput(
                            f"out of memory at batch size {batch_size} ({input_ids.shape[1]} tokens a row): the "
                            "samples so far are kept; rerun with a smaller --batch-size (or --layers eagle3) and --resume"
                        ) from None
                    offloader.submit(list(zip(batch, spans)), states)
        finally:
            bar.close()
    return os.fspath(out_path)


def pad_batch(token_lists: Sequence[Sequence[int]], padding_side: str, device, pad_id: int = 0):
    """Pad token lists into one batch: ``(input_ids, attention_mask, position_ids, spans)``.

    ``spans[i] = (first, stop)`` are the columns of row i that hold sample i's own tokens.
    Positions count from each sample's first token, so a left-padded sample sees the positions
    it would see alone.
    """
    width = max(len(t) for t in token_lists)
    input_ids = torch.full((len(token_lists), width), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(token_lists), width), dtype=torch.long)
    position_ids = torch.zeros((len(token_lists), width), dtype=torch.long)
    spans = []
    for row, tokens in enumerate(token_lists):
        first = width - len(tokens) if padding_side == "left" else 0
        stop = first + len(tokens)
        input_ids[row, first:stop] = torch.as_tensor(tokens, dtype=torch.long)
        attention_mask[row, first:stop] = 1
        position_ids[row, first:stop] = torch.arange(len(tokens))
        spans.append((first, stop))
    return input_ids.to(device), attention_mask.to(device), position_ids.to(device), spans


def batch_streams(fs, streams: Mapping[str, StreamClaim]) -> dict[str, torch.Tensor]:
    """Each stream of a batch as its claim says, ``[batch, seq, width]``, still on the model's device."""
    out = {}
    for name, claim in streams.items():
        parts = [fs.final_prenorm if k == fs.num_layers and claim.final_norm == FINAL_NORM_PRE else fs.hf[k]
                 for k in claim.hf_indices]
        # Under a device map the parts lie on the devices of their layers: joined on the first one's.
        out[name] = parts[0] if len(parts) == 1 else torch.cat([t.to(parts[0].device) for t in parts], dim=-1)
    return out


def input_device(model) -> torch.device:
    """Where the token ids go: the embedding's execution device. Under an accelerate device map whose
    embedding is offloaded (``cpu``/``disk``) that is the map's first GPU, where the hooks run it."""
    device_map = getattr(model, "hf_device_map", None)
    if isinstance(device_map, dict) and device_map:
        gpus = [d for d in device_map.values() if isinstance(d, int) or (isinstance(d, str) and d.startswith("cuda"))]
        for key, where in device_map.items():
            if key == "" or "embed" in key:
                if where in ("cpu", "disk"):
                    break
                return torch.device(f"cuda:{where}" if isinstance(where, int) else where)
        return torch.device(f"cuda:{gpus[0]}" if gpus and isinstance(gpus[0], int) else (gpus[0] if gpus else "cpu"))
    return model.get_input_embeddings().weight.device


def load_hf_model(
    path: str | os.PathLike,
    dtype: str | torch.dtype | None = "bf16",
    device: str | None = None,
    *,
    trust_remote_code: bool = False,
    quiet: bool = False,
    device_map: str | None = None,
    max_memory: Mapping[int | str, str] | None = None,
    offload_folder: str | os.PathLike | None = None,
):
    """Load a local transformers model directory: ``(model, tokenizer or None)``, in eval mode.

    ``trust_remote_code`` runs the directory's own modeling code (some Kimi checkpoints need it):
    off unless asked, as it executes code from the checkpoint. ``quiet``: no weight-loading bar.
    ``device_map`` (``auto``, ``balanced``, ``balanced_low_0``, ``sequential``) spreads the layers over
    the GPUs of this host through accelerate, ``max_memory`` caps each device (``{0: "120GiB",
    "cpu": "400GiB"}``), and what does not fit runs from host memory or ``offload_folder``, each
    layer's weights brought to its GPU when it runs. A quantized checkpoint (its config's
    ``quantization_config``: FP8 block, compressed-tensors) loads the way transformers loads it.
    Whatever transformers raises on a damaged folder (a truncated safetensors file, a junk
    pytorch_model.bin, a config of the wrong types or sizes) is one line naming the folder.
    """
    path = os.fspath(path)
    transformers = _import_transformers()
    local_model_dir(path)
    torch_dtype = parse_dtype(dtype)
    if device_map is not None and device is not None:
        raise BadInput("give --device or --device-map, not both: a device map places every layer itself")
    target = checked_device(device) if device is not None else None
    placement = _placement(device_map, max_memory, offload_folder)
    _quiet_transformers(transformers, quiet)
    with engine_failure("transformers", f"loading the model in {path}",
                        "check the folder holds a complete, matching config.json and weights"):
        model = transformers.AutoModelForCausalLM.from_pretrained(
            path, dtype=torch_dtype, local_files_only=True, trust_remote_code=trust_remote_code, **placement
        )
    if target is not None:
        with engine_failure("torch", f"moving the model to {device}"):
            model = model.to(target)
    tokenizer = None
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(
            path, local_files_only=True, trust_remote_code=trust_remote_code
        )
    except (OSError, ValueError, KeyError, TypeError):
        pass  # prompts given as input_ids need no tokenizer; text and chat prompts will say so
    return model.eval(), tokenizer


def local_model_dir(path: str | os.PathLike) -> str:
    """``path`` if it is a saved model's folder whose config.json gives a usable layer count (checked
    before anything loads: the gate checks it before it captures either side)."""
    path = os.fspath(path)
    if not os.path.isdir(path) or not os.path.isfile(os.path.join(path, "config.json")):
        raise BadInput(f"{path}: not a local model directory (no config.json); give the folder of a saved model")
    _check_layer_count(path)
    return path


# -- plumbing ------------------------------------------------------------------------------------

DEVICE_MAPS = ("auto", "balanced", "balanced_low_0", "sequential", "cpu")


def _placement(device_map, max_memory, offload_folder) -> dict[str, Any]:
    """from_pretrained's placement keywords, checked: accelerate must be importable for a device map."""
    if device_map is None:
        if max_memory or offload_folder:
            raise BadInput("--max-memory and --offload-folder need --device-map")
        return {}
    if device_map not in DEVICE_MAPS:
        raise BadInput(f"--device-map {device_map!r} is not one of {', '.join(DEVICE_MAPS)}")
    try:
        import accelerate  # noqa: F401
    except ImportError:
        raise BadInput("--device-map needs accelerate: pip install 'alignprobe[hf]'") from None
    placement: dict[str, Any] = {"device_map": device_map}
    if max_memory:
        placement["max_memory"] = dict(max_memory)
    if offload_folder is not None:
        placement["offload_folder"] = os.fspath(offload_folder)
    return placement


def parse_max_memory(text: str | None) -> dict[int | str, str] | None:
    """``"0=120GiB,1=120GiB,cpu=400GiB"`` -> ``{0: "120GiB", 1: "120GiB", "cpu": "400GiB"}``."""
    if not text:
        return None
    out: dict[int | str, str] = {}
    for part in text.split(","):
        key, sep, size = part.strip().partition("=")
        key, size = key.strip(), size.strip()
        if not sep or not key or not size or not (key.isdigit() or key in ("cpu", "disk")):
            raise BadInput(f"--max-memory {text!r}: give DEVICE=SIZE pairs, e.g. 0=120GiB,cpu=400GiB "
                           "(DEVICE a GPU index, cpu or disk)")
        if not size[0].isdigit():
            raise BadInput(f"--max-memory {text!r}: {size!r} is not a size like 120GiB")
        out[int(key) if key.isdigit() else key] = size
    return out


def _check_layer_count(path: str) -> None:
    """num_hidden_layers read before transformers builds the model: 100000 (a typo, a damaged config)
    had it build layers for minutes with no end in sight, and -1 surfaced as an aux-layer error."""
    from alignprobe.dump.schema import MAX_NUM_LAYERS
    from alignprobe.safe_json import read_config

    config_path = os.path.join(path, "config.json")
    config = read_config(path, "model config.json", "a model config")
    for section, where in ((config, ""), (config.get("text_config"), "text_config.")):
        if not isinstance(section, dict) or "num_hidden_layers" not in section:
            continue
        n = section["num_hidden_layers"]
        if isinstance(n, int) and not isinstance(n, bool) and not 1 <= n <= MAX_NUM_LAYERS:
            raise BadInput(f"{config_path}: {where}num_hidden_layers is {n}, not a model's layer count "
                           f"(1..{MAX_NUM_LAYERS}); the config is damaged or of another model")


def _quiet_transformers(transformers, quiet: bool) -> None:
    # Its logger's warnings (unused weights, a missing generation config) are noise before a
    # capture; the weight-loading bar is shown only when a progress bar is wanted.
    transformers.utils.logging.set_verbosity_error()
    if quiet:
        transformers.utils.logging.disable_progress_bar()
    else:
        transformers.utils.logging.enable_progress_bar()


def _checked(prompts: Sequence[Prompt], shape: ModelShape) -> list[Prompt]:
    prompts = list(prompts)
    if not prompts:
        raise BadInput("no prompts to capture")
    seen: set[str] = set()
    for p in prompts:
        if p.sample_id in seen:
            raise BadInput(f"sample id {p.sample_id!r} appears twice among the prompts; ids must be unique")
        seen.add(p.sample_id)
        if not p.token_ids:
            raise BadInput(f"prompt {p.sample_id!r} has no tokens")
        if shape.max_positions and len(p.token_ids) > shape.max_positions:
            raise BadInput(
                f"prompt {p.sample_id!r} has {len(p.token_ids)} tokens, more than the model's "
                f"max_position_embeddings ({shape.max_positions}): shorten it or drop it"
            )
        top = max(p.token_ids)
        if top >= shape.vocab_size or min(p.token_ids) < 0:
            raise BadInput(
                f"prompt {p.sample_id!r} has token id {top}, outside the model's vocabulary of {shape.vocab_size}: "
                "were the prompts tokenized for another model?"
            )
    return prompts


def _pad_id(model) -> int:
    # Any id in the vocabulary works: padded positions are masked and never written.
    pad = getattr(model.config, "pad_token_id", None)
    return int(pad) if isinstance(pad, int) and pad >= 0 else 0


def _routed_experts(config) -> int:
    """Experts a token is routed among (DeepseekV3 n_routed_experts, Mixtral num_local_experts, Qwen-MoE
    num_experts); 0 for a dense model."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    for key in ("n_routed_experts", "num_local_experts", "num_experts"):
        value = getattr(text, key, None)
        if isinstance(value, int) and value > 0:
            return value
    return 0


def _provenance(model, given, selected, aux, batch_size, padding_side, stored_dtype) -> Provenance:
    import transformers

    config = model.config
    quant = getattr(model, "alignprobe_quantization", None)
    quantization = quant.label if quant is not None else ""
    if not quantization and getattr(config, "quantization_config", None):
        qc = config.quantization_config
        quantization = str(qc.get("quant_method", "quantized") if isinstance(qc, dict) else getattr(qc, "quant_method", qc))
    capture = {
        "layers": list(selected),
        "aux_layers": list(aux),
        "batch_size": batch_size,
        "padding_side": padding_side,
        "device": str(input_device(model)),
        "architecture": type(model).__name__,
        # 0 for a dense model: compare names isolated token outliers as MoE routing flips only where
        # the model routes (compare/diagnoses/numeric.py flips_only)
        "routed_experts": _routed_experts(config),
    }
    if getattr(model, "hf_device_map", None):
        # how many modules each device holds: where the weights lay is part of how the states were made
        placed: dict[str, int] = {}
        for where in model.hf_device_map.values():
            placed[str(where)] = placed.get(str(where), 0) + 1
        capture["device_map"] = placed
    if quant is not None:
        capture["simulated_quant"] = dataclasses.asdict(quant)
    fields: dict[str, Any] = {
        "engine": ENGINE,
        "engine_version": transformers.__version__,
        "model": str(getattr(config, "_name_or_path", "") or ""),
        "model_revision": str(getattr(config, "_commit_hash", "") or ""),
        "dtype": stored_dtype,
        "quantization": quantization,
    }
    return Provenance.for_capture(capture, given, **fields)



def _import_transformers():
    try:
        import transformers
    except ImportError:
        raise BadInput("transformers is not installed: pip install 'alignprobe[hf]'") from None
    return transformers
