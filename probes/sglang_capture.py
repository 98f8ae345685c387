"""Capture what an SGLang server feeds the drafter: one prefill per prompt, hidden states returned.

The wire format, read from sgl-project/sglang (2026 main): a ``/generate`` request with
``input_ids``, ``sampling_params`` and ``return_hidden_states: true``
(managers/io_struct.py GenerateReqInput) answers ``{"text", "output_ids", "meta_info"}``; the
tokenizer manager copies ``recv_obj.output_hidden_states[i]`` into ``meta_info["hidden_states"]``
(managers/tokenizer_manager.py). Element 0 is the prefill, ``[len(prompt)][width]`` as JSON floats
(managers/scheduler_components/batch_result_processor.py ``_append_prefill_hidden_states``
slices ``len(req.origin_input_ids)`` rows of the batch's extend rows), then one ``[width]`` vector
per decoded token. ``meta_info["cached_tokens"]`` counts prompt tokens served from the radix cache,
whose rows were never computed. A real SGLang 0.5.23 answers ``max_new_tokens: 0`` with an empty
list (seen on the real server, docs/serving/sglang.md), so the capture asks for one new token and
takes element 0 alone; the decode elements are unreliable under speculative decoding anyway
(sgl-project/sglang issue #26163, 2026-05).
Which aux layers the rows hold follows the ids the server ran with: its own
``--return-aux-hidden-state-layer-ids`` (reported in /server_info), else the draft config's, else
the model defaults.

A backend is anything with ``where``, ``server_info() -> ServerFacts`` and ``generate(token_ids,
max_new_tokens) -> dict``: the HTTP client (probes/sglang_http.py) and the offline
``sglang.Engine`` (probes/sglang_engine.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import time
from typing import Any, Mapping, Protocol, Sequence

import numpy as np

from alignprobe.probes.progress import progress_bar
from alignprobe.dump import DumpWriter, Provenance
from alignprobe.dump.readahead import read_ahead
from alignprobe.errors import BadInput
from alignprobe.safe_json import local_config
from alignprobe.probes.dump_prompts import prompts_from_dump
from alignprobe.probes.prompts import Prompt, load_prompts
from alignprobe.probes.returned_rows import placed_rows, usable
from alignprobe.probes.sglang_facts import (
    FLAG_HIDDEN_STATES,
    ModelFacts,
    ServerFacts,
    WidthClaim,
    claim_for_width,
    draft_aux_layer_ids,
    model_facts_from_config,
)

ENGINE = "sglang"
STREAM = "hidden_states"  # the contract's one SGLang stream, role drafter_input
# A server answers a few prompts a second: write a shard at least this often, so kill -9 loses
# seconds of requests, not the whole token buffer (DumpWriter flushes by size otherwise).
FLUSH_EVERY_S = 10.0
DEFAULT_MAX_NEW_TOKENS = 1  # 0 gets no hidden states from a real SGLang 0.5.23
DEFAULT_IN_FLIGHT = 2  # requests ahead of the writer: the server computes and sends while we decode


class SGLangBackend(Protocol):
    where: str

    def server_info(self) -> ServerFacts: ...

    def generate(self, token_ids: list[int], max_new_tokens: int) -> Any: ...

    # Optional, for backends whose answers are costly to decode (HTTP): ``request`` returns the raw
    # answer and ``decode`` turns it into what ``generate`` returns; requests then run in threads
    # while decoding stays in the capture's thread, unless ``decodes_in_parallel`` is true (the
    # decode runs in worker processes): then the threads decode too.


@dataclasses.dataclass(frozen=True)
class PromptSource:
    prompts: list[Prompt]
    source: str
    num_layers: int | None = None
    hidden_size: int | None = None


def resolve_prompts(prompts: PromptSource | Sequence[Prompt] | str | os.PathLike,
                    num_layers: int | None = None) -> PromptSource:
    """Prompts as given, from a dump or a training-set folder (``--tokens-from``) or from a JSONL of
    ``input_ids`` lines; a PromptSource already resolved is returned as it is (read once)."""
    if isinstance(prompts, PromptSource):
        return prompts
    if not isinstance(prompts, (str, os.PathLike)):
        return PromptSource(list(prompts), "given")
    path = os.fspath(prompts)
    if _is_hdf5(path) or os.path.isdir(path):
        tokens = prompts_from_dump(path, num_layers=num_layers)
        return PromptSource(tokens.prompts, path, tokens.num_layers, tokens.hidden_size)
    # Text and chat lines need the served model's tokenizer; token ids keep both sides identical.
    return PromptSource(load_prompts(path).prompts, path)


def capture_from_backend(
    backend: SGLangBackend,
    prompts: PromptSource | Sequence[Prompt] | str | os.PathLike,
    out_path: str | os.PathLike,
    *,
    layer_ids: Sequence[int] | None = None,
    num_layers: int | None = None,
    hidden_size: int | None = None,
    arch: str | None = None,
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
    in_flight: int = DEFAULT_IN_FLIGHT,
    sglang_first_id_rule: bool = True,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    provenance: Mapping[str, Any] | None = None,
    capture_settings: Mapping[str, Any] | None = None,
) -> str:
    """Capture ``prompts`` through ``backend`` into the dump ``out_path``; returns its path.

    ``prompts``: Prompt objects, a dump to take tokens and sample ids from (``--tokens-from``), or a
    JSONL of ``input_ids`` lines. ``layer_ids``: the drafter's ``eagle_aux_hidden_state_layer_ids``
    when the server's draft config is not a local folder. ``num_layers``/``hidden_size``/``arch``:
    the target model's shape and family when its config.json is not local (a dump given as
    ``prompts`` also supplies the shape). ``in_flight``: requests asked ahead of the one being
    written. ``max_new_tokens``: 1 by default, since a real SGLang 0.5.23 returns no hidden states
    at all for 0.
    """
    if max_new_tokens not in (0, 1):
        raise BadInput(f"max_new_tokens must be 0 or 1 (a prefill), got {max_new_tokens}")
    if in_flight < 1:
        raise BadInput(f"in_flight must be 1 or more, got {in_flight}")
    source = resolve_prompts(prompts, num_layers)
    if not source.prompts:
        raise BadInput("no prompts to capture")
    facts = backend.server_info()
    if facts.hidden_states_reported_off:
        raise BadInput(
            f"{backend.where}: the server does not return full hidden states "
            f"(return_hidden_states_mode={facts.hidden_states_mode or 'off'}): relaunch it with {FLAG_HIDDEN_STATES}"
        )
    model = _model_facts(facts, source, num_layers, hidden_size, arch)
    ids, ids_from = _layer_ids(layer_ids, facts)

    # The first prompt is asked before the writer opens: its width decides the claim, and on
    # resume the claim must equal the one the partial capture was started with.
    first = source.prompts[0]
    first_rows = prefill_rows(backend.generate(first.token_ids, max_new_tokens), first, backend.where, max_new_tokens)
    dtype = exact_dtype(first_rows)
    width = claim_for_width(first_rows.shape[1], model, facts, ids, dtype, sglang_first_id_rule=sglang_first_id_rule)
    settings = {"layer_ids_from": ids_from, "in_flight": in_flight, **(capture_settings or {})}
    record = _provenance(backend, facts, model, width, max_new_tokens, source, provenance, settings)

    with DumpWriter(out_path, record, {STREAM: width.claim}, resume=resume, overwrite=overwrite) as writer:
        todo = [p for p in source.prompts if p.sample_id not in writer.done_ids]
        bar = progress_bar(len(source.prompts), len(source.prompts) - len(todo), progress, unit="prompt", desc="capture sglang")
        last_flush = time.monotonic()
        usable_samples = len(source.prompts) - len(todo)  # on resume, the samples done are not re-judged
        # Threads send requests and read answers (socket reads release the GIL). Decoding in this
        # process is CPU work under the GIL, so it stays here, one answer at a time: two threads
        # decoding at once were slower than one. A backend that decodes in worker processes
        # (decodes_in_parallel) decodes in the threads instead: each waits for its worker without the
        # GIL, and answers are parsed while the next ones arrive (benchmarks/sglang_capture_throughput.py).
        request = getattr(backend, "request", backend.generate)
        decode = getattr(backend, "decode", lambda answer: answer)
        in_threads = getattr(backend, "decodes_in_parallel", False)

        def ask(prompt, decode_here=decode if in_threads else None):
            answer = request(prompt.token_ids, max_new_tokens)
            return answer if decode_here is None else decode_here(answer)

        if in_threads:
            decode = lambda answer: answer  # noqa: E731
        try:
            for prompt, answer in _in_order(todo, first, ask, in_flight):
                rows = first_rows if prompt is first else prefill_rows(decode(answer), prompt, backend.where,
                                                                      max_new_tokens)
                _check_row(rows, prompt, width, dtype, backend.where)
                rows, mark = placed_rows(rows, len(prompt.token_ids), backend.where, prompt.sample_id,
                                         "a server bug: capture again")
                usable_samples += usable(mark)
                writer.add(prompt.sample_id, prompt.token_ids, {STREAM: rows}, mark if mark.marked else None)
                bar.update(1)
                if time.monotonic() - last_flush >= FLUSH_EVERY_S:
                    writer.flush()
                    last_flush = time.monotonic()
            if not usable_samples:
                # Kept-and-marked samples serve a comparison; a capture of nothing but NaN placeholders
                # and non-finite rows serves none: refuse it here rather than write it.
                raise BadInput(
                    f"{backend.where}: no sample came back with a finite row of hidden states (all {len(todo)} "
                    "NaN/Inf or without rows): nothing to compare; check the server (fp16 overflow, a broken "
                    f"kernel), then capture again into a new --out (or delete {writer.partial_dir}/)"
                )
        finally:
            bar.close()
    return os.fspath(out_path)


def _in_order(todo, first, ask, in_flight):
    """``(prompt, answer)`` in prompt order, with up to ``in_flight`` requests asked ahead in threads.

    The threads overlap the server's compute and the transfer of the next answers with the decoding
    and writing of this one. An error stops the capture at the first failing prompt in order; the
    requests still in flight are cancelled or drained. ``first`` was asked already: its answer is None.
    """
    loads = [(lambda: None) if prompt is first else functools.partial(ask, prompt) for prompt in todo]
    with contextlib.closing(read_ahead(loads, in_flight, threads=in_flight)) as answers:
        yield from zip(todo, answers)


# -- one response --------------------------------------------------------------------------------


def prefill_rows(response: Any, prompt: Prompt, where: str, max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS) -> np.ndarray:
    """The prefill element of ``meta_info["hidden_states"]`` as float32 ``[rows, width]``, as returned.

    ``rows`` is ``len(prompt)``, or fewer when the server computed only a suffix (radix cache, chunked
    prefill); NaN / Inf values stay. The capture places and marks them (probes/returned_rows.py)."""
    if isinstance(response, list) and len(response) == 1:
        response = response[0]  # a batch of one
    meta = response.get("meta_info") if isinstance(response, dict) else None
    if not isinstance(meta, dict):
        raise BadInput(f"{where}: /generate answered without meta_info; is this an SGLang server?")
    states = meta.get("hidden_states")
    if states is None:
        raise BadInput(f"{where}: the server returned no hidden states; relaunch it with {FLAG_HIDDEN_STATES}")
    if not isinstance(states, (list, tuple)) or len(states) == 0:
        if max_new_tokens == 0:
            raise BadInput(
                f"{where}: meta_info.hidden_states is empty for sample {prompt.sample_id!r}: asked for 0 new tokens, "
                "the server returns no hidden states at all (SGLang 0.5.23 does); capture with --max-new-tokens 1"
            )
        raise BadInput(f"{where}: meta_info.hidden_states is empty for sample {prompt.sample_id!r}")
    if states[0] is None:
        raise BadInput(
            f"{where}: meta_info.hidden_states[0] of sample {prompt.sample_id!r} is not a [tokens][width] list of numbers"
        )
    try:
        rows = np.asarray(_as_numbers(states[0]), dtype=np.float32)
    except (ValueError, TypeError):
        raise BadInput(
            f"{where}: meta_info.hidden_states[0] of sample {prompt.sample_id!r} is not a [tokens][width] list of numbers"
        ) from None
    if rows.ndim == 1 and len(prompt.token_ids) == 1:
        rows = rows[None, :]
    if rows.ndim != 2 or rows.shape[1] == 0:
        raise BadInput(
            f"{where}: meta_info.hidden_states[0] of sample {prompt.sample_id!r} has shape {rows.shape}, "
            "expected [tokens, width]"
        )
    n = len(prompt.token_ids)
    if rows.shape[0] > n:
        # SGLang slices len(origin_input_ids) rows per request: more cannot be this prompt's rows alone
        raise BadInput(
            f"{where}: sample {prompt.sample_id!r} got {rows.shape[0]} prefill rows for {n} prompt tokens; "
            "the server's hidden states do not line up with the prompt"
        )
    # Fewer rows than tokens (a radix-cache hit, chunked prefill) and NaN/Inf rows are kept as returned
    # and marked (probes/returned_rows.py): the comparison says where they are.
    return rows


def exact_dtype(rows: np.ndarray) -> str:
    """The narrowest dump dtype that holds every value exactly (JSON floats carry no dtype).

    Rows with no finite value tell nothing: float32, which holds whatever comes later."""
    return _finite_dtype(rows) or "float32"


def _finite_dtype(rows: np.ndarray) -> str | None:
    """:func:`exact_dtype` of the finite values (every dtype holds NaN and Inf); None without any."""
    rows = np.asarray(rows, dtype=np.float32)
    if not np.isfinite(rows).all():
        rows = rows[np.isfinite(rows)]
        if not rows.size:
            return None
    bits = np.ascontiguousarray(rows).view(np.uint32)
    if not (bits & 0xFFFF).any():
        return "bfloat16"
    if np.array_equal(rows.astype(np.float16).astype(np.float32), rows):
        return "float16"
    return "float32"


def _as_numbers(value):
    # the offline Engine may hand back tensors or arrays where HTTP gives lists
    if hasattr(value, "detach"):
        value = value.detach().float().cpu().numpy()
    return value


def _check_row(rows: np.ndarray, prompt: Prompt, width: WidthClaim, dtype: str, where: str) -> None:
    if rows.shape[1] != width.width:
        raise BadInput(
            f"{where}: sample {prompt.sample_id!r} came back {rows.shape[1]} wide, the first was {width.width}; "
            "did the server restart with other settings mid-capture?"
        )
    if dtype != "float32" and _finite_dtype(rows) not in _NARROWER_OR_SAME[dtype] + (None,):
        raise BadInput(
            f"{where}: sample {prompt.sample_id!r} holds values that {dtype} cannot store exactly; "
            "the server's dtype changed mid-capture: capture again into a new file"
        )


_NARROWER_OR_SAME = {"bfloat16": ("bfloat16",), "float16": ("bfloat16", "float16")}


# -- facts ---------------------------------------------------------------------------------------


def _layer_ids(given: Sequence[int] | None, facts: ServerFacts) -> tuple[list[int] | None, str]:
    """The SGLang aux ids the rows were captured with, and where that came from.

    The server's own ``--return-aux-hidden-state-layer-ids`` are what ran: they win over ids the user
    believes, which are recorded in provenance instead. The draft config's ids are what the model
    runner reads otherwise; None means SGLang's model defaults (no +1 on those).
    """
    if facts.aux_layer_ids is not None:
        note = "" if given is None or list(given) == facts.aux_layer_ids else f" (--layer-ids {list(given)} ignored)"
        return list(facts.aux_layer_ids), "the server's --return-aux-hidden-state-layer-ids" + note
    if given is not None:
        return list(given), "--layer-ids"
    from_draft = draft_aux_layer_ids(facts.draft_model_path)
    if from_draft is not None:
        return from_draft, f"{facts.draft_model_path}/config.json eagle_config"
    return None, "the model's defaults (no explicit ids)"


def _model_facts(facts: ServerFacts, source: PromptSource, num_layers, hidden_size, arch) -> ModelFacts:
    from_config = None
    config = local_config(facts.model_path)
    if config is not None:
        from_config = model_facts_from_config(config, f"{facts.model_path}/config.json")
    n = num_layers or (from_config.num_layers if from_config else None) or source.num_layers
    h = hidden_size or (from_config.hidden_size if from_config else None) or source.hidden_size
    if not n or not h:
        raise BadInput(
            "the model's layer count and hidden size are unknown (the server's model path is not a local folder "
            "with config.json): pass --num-layers and --hidden-size, or --tokens-from a dump of the same model"
        )
    family = arch or (from_config.arch if from_config else "llama")
    origin = "given" if num_layers and hidden_size else (from_config.source if from_config else source.source)
    return ModelFacts(int(n), int(h), family, from_config.torch_dtype if from_config else "", origin)


def _provenance(backend, facts: ServerFacts, model: ModelFacts, width: WidthClaim, max_new_tokens, source, given,
                settings) -> Provenance:
    capture = {
        "server": backend.where,
        "server_info_endpoint": facts.endpoint,
        "speculative_algorithm": facts.speculative_algorithm,
        "draft_model_path": facts.draft_model_path,
        "aux_layer_ids": list(width.layer_ids) if width.layer_ids is not None else None,
        "width": width.width,
        "width_means": width.meaning,
        "hidden_states_mode": facts.hidden_states_mode,
        "radix_cache": facts.radix_cache,
        "chunked_prefill_size": facts.chunked_prefill_size,
        "full_row_risks": facts.full_row_risks(),  # settings that can cut prefill rows short (checked per sample)
        "max_new_tokens": max_new_tokens,
        "prompts": source.source,
        "num_prompts": len(source.prompts),
        "model_shape": {"num_layers": model.num_layers, "hidden_size": model.hidden_size, "arch": model.arch,
                        "from": model.source},
        "stored_dtype_inferred_from_values": width.claim.dtype,
    }
    capture.update(settings or {})
    fields: dict[str, Any] = {
        "engine": ENGINE,
        "engine_version": facts.version,
        "model": facts.model_path,
        "dtype": facts.dtype if facts.dtype not in ("", "auto") else model.torch_dtype,
        "quantization": facts.quantization,
        "extra": {"server_info": facts.summary()},
    }
    return Provenance.for_capture(capture, given, **fields)



def _is_hdf5(path: str) -> bool:
    import h5py

    return os.path.isfile(path) and h5py.is_hdf5(path)
