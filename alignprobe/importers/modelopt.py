"""NVIDIA Model-Optimizer's hidden-state dumps: one ``{conversation_id}.pt`` a conversation.

Read from Model-Optimizer's source (NVIDIA/Model-Optimizer bee497de,
examples/speculative_decoding/collect_hidden_states/): every backend saves one ``torch.save`` dict
with ``input_ids [S]``, ``hidden_states [S, H]`` (the final state), ``aux_hidden_states [S, k*H]``,
``conversation_id`` and, from the HF and vLLM backends, ``loss_mask [S]``. The keys are the same;
the layer numbering is not:
- compute_hidden_states_hf.py concatenates ``outputs.hidden_states[k + 1]`` for each ``--aux-layers``
  id k (the output of layer k) and saves ``hidden_states[-1]`` (post-norm) as its own tensor;
- compute_hidden_states_vllm.py hands the ids plus ``num_hidden_layers`` to vLLM's
  ``eagle_aux_hidden_state_layer_ids`` (id k = the input of layer k) and saves
  ``hidden_states[:, -1, :]`` of the connector's ``[S, k+1, H]`` tensor: the pre-norm final, saved
  as a view, so the file stores the whole ``[S, k+1, H]`` storage behind it (row stride (k+1)*H);
- compute_hidden_states_trtllm.py renames TensorRT-LLM's SaveState record (no loss_mask), whose
  ids are read as TensorRT-LLM reads them: the output of layer k, as the HF backend.
So the backend is told from the files: a final state stored as a strided view of a (k+1)-slice
storage is the vLLM backend's; a final state of its own storage the HF (or TensorRT-LLM) backend's.
A file that fits neither is refused with a line that asks for ``--system modelopt-hf|modelopt-vllm``.
"""

from __future__ import annotations

import os

import torch

from alignprobe.errors import BadInput
from alignprobe.importers.files import load_torch_dict
from alignprobe.importers.layout import Layout, SampleRef
from alignprobe.importers.sample import ForeignSample, as_states, as_token_ids
from alignprobe.importers.specforge import read_tokens

SUFFIX = ".pt"
KEYS = {"input_ids", "hidden_states", "aux_hidden_states", "conversation_id"}
HF, VLLM = "modelopt-hf", "modelopt-vllm"
BACKENDS = (HF, VLLM)


def list_files(root: str) -> list[str]:
    """Every ``*.pt`` in ``root`` (or ``root`` itself), by name (conversation ids are names, not numbers)."""
    if os.path.isfile(root):
        return [root]
    return sorted(e.path for e in os.scandir(root) if e.is_file() and e.name.endswith(SUFFIX))


def is_modelopt(keys) -> bool:
    return KEYS <= set(keys)


def backend_of(data: dict, path: str) -> str:
    """``modelopt-hf`` or ``modelopt-vllm``, from how the final state is stored (see the module note)."""
    final, aux = data["hidden_states"], data["aux_hidden_states"]
    if not isinstance(final, torch.Tensor) or not isinstance(aux, torch.Tensor) or final.ndim != 2:
        raise BadInput(f"{path}: hidden_states / aux_hidden_states are not the [S, H] / [S, k*H] tensors "
                       "Model-Optimizer saves")
    rows, hidden = final.shape
    if final.is_contiguous() and final.untyped_storage().nbytes() == final.numel() * final.element_size():
        return HF
    slices = aux.shape[-1] // hidden if hidden else 0
    if rows > 1 and final.stride() == ((slices + 1) * hidden, 1) and final.storage_offset() == slices * hidden:
        return VLLM
    raise BadInput(f"{path}: cannot tell which Model-Optimizer backend wrote the file (its final state is "
                   "stored neither as the HF nor as the vLLM dump script stores it): give "
                   "--system modelopt-hf or modelopt-vllm (compare: --train-system)")


def read(path: str, mmap: bool = True, strict: bool = True) -> ForeignSample:
    """One conversation. ``strict=False`` (the audit's) takes states whose rows differ from the tokens."""
    data = load_torch_dict(path, mmap=mmap)
    if not is_modelopt(data):
        raise BadInput(f"{path}: keys {sorted(data)} are not a Model-Optimizer dump "
                       f"(expected {', '.join(sorted(KEYS))}, and loss_mask)")
    tokens = as_token_ids(data["input_ids"], path, "input_ids")
    rows = len(tokens) if strict else None
    mask = data.get("loss_mask")
    loss_mask = None
    if isinstance(mask, torch.Tensor):
        loss_mask = as_token_ids(mask.ne(0), path, "loss_mask")
        if len(loss_mask) != len(tokens):
            raise BadInput(f"{path}: loss_mask holds {len(loss_mask)} tokens but input_ids holds {len(tokens)}")
    elif strict and mask is not None:
        raise BadInput(f"{path}: loss_mask is a {type(mask).__name__}, expected a tensor")
    final = as_states(data["hidden_states"], path, "hidden_states", rows, 2)
    aux = as_states(data["aux_hidden_states"], path, "aux_hidden_states", rows, 2)
    hidden = int(final.shape[-1])
    if strict and aux.shape[-1] % hidden:
        raise BadInput(f"{path}: aux_hidden_states is {aux.shape[-1]} wide, not a multiple of hidden_states' {hidden}")
    layout = backend_of(data, path) if strict else "modelopt"
    return ForeignSample(path, None, tokens, loss_mask, aux, final, hidden, layout=layout)


class ModelOptLayout(Layout):
    """One ``{conversation_id}.pt`` dict a conversation; the ids are not in the files, and the backend
    (so the numbering) is told from how the final state is stored, or given."""

    name = "modelopt"
    described = "Model-Optimizer *.pt"
    needs_keys = True
    mappable = True
    aliases = BACKENDS
    has_default_ids = False  # its 'eagle' preset is computed by modelopt for the target, not a fixed rule

    def files(self, path: str) -> list[str]:
        return list_files(path) if os.path.isdir(path) or path.endswith(SUFFIX) else []

    def accepts(self, found) -> bool:
        return found is not None and not found.records and is_modelopt(found.keys)

    def read(self, ref: SampleRef, mmap: bool = True, strict: bool = True) -> ForeignSample:
        sample = read(ref.path, mmap=mmap, strict=False)
        if strict and (len(sample.aux) != len(sample.token_ids) or len(sample.final) != len(sample.token_ids)):
            raise BadInput(f"{ref}: the states hold {len(sample.aux)} and {len(sample.final)} rows but input_ids "
                           f"holds {len(sample.token_ids)} tokens")
        return sample

    def read_tokens(self, ref: SampleRef):
        return read_tokens(ref.path)  # input_ids and loss_mask under SpecForge's names

    def convention(self, first: ForeignSample, system: str | None) -> str:
        if system and system.lower() in BACKENDS:
            return system.lower()
        return read(first.path).layout  # strict: the storage tells the backend, or it is refused

    def final_norm_of(self, mapping_final_norm: str) -> str:
        return mapping_final_norm  # the HF script saves the post-norm final, the vLLM one vLLM's pre-norm id N


LAYOUT = ModelOptLayout()
