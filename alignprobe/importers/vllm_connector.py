"""vLLM's ``extract_hidden_states`` connector folder: one ``{req_id}.safetensors`` a request.

Read from vllm-project/vllm (conventions.SOURCES["vllm_extract"]): with ``--speculative-config
'{"method": "extract_hidden_states", "num_speculative_tokens": 1, "draft_model_config": {"hf_config":
{"eagle_aux_hidden_state_layer_ids": [...]}}}'`` and ``--kv-transfer-config '{"kv_connector":
"ExampleHiddenStatesConnector", "kv_role": "kv_producer", "kv_connector_extra_config":
{"shared_storage_path": DIR}}'``, every request leaves ``DIR/{req_id}.safetensors`` (plus a
``.lock`` file held while it is written) holding

    hidden_states  [S, L, H]  the model dtype; slice j is the j-th aux layer in layer order
    token_ids      [S]        the prompt (prompt + output minus the last token with include_output_tokens)

Layer id k is HF[k] (``hidden_states + residual`` entering layer k); id N is the last layer's output
before the final norm. The files do not record the ids, so the user states them (no default is
assumed). speculators' offline generator moves these same files to ``hs_<idx>.safetensors``
(speculators.py, which detection tries first and whose FP8 arithmetic and row reader this reuses).
A file the connector still holds locked is refused, never read half-written. A prefix-cache hit
leaves fewer rows than tokens (the connector gets the rows computed): an import refuses such a file,
``alignprobe capture vllm --from-dir`` keeps it, marked (probes/vllm_files.py).
"""

from __future__ import annotations

import fcntl
import os
import stat

import numpy as np
import torch

from alignprobe.dump.schema import FINAL_NORM_PRE
from alignprobe.errors import BadInput, first_line
from alignprobe.importers import speculators
from alignprobe.importers.files import SafetensorsFile, file_index
from alignprobe.importers.layout import IdsFit, Layout, SampleRef
from alignprobe.importers.sample import ForeignSample, as_states, as_token_ids

SUFFIX = ".safetensors"
KEY_STATES, KEY_TOKENS = "hidden_states", "token_ids"
SHOWN_KEYS = 6  # a model's weights file (a wrong path) holds thousands: the line names a few


def list_files(root: str) -> list[str]:
    """The ``*.safetensors`` files of a storage folder (not its subfolders), by name; ``root`` itself if it
    is one. [] where the folder holds speculators' ``hs_<idx>`` files: they are speculators'."""
    if not os.path.isdir(root):
        return [root] if root.endswith(SUFFIX) and file_index(root) is None else []
    # a FIFO or folder so named is listed: reading it is refused with one line (regular_file)
    found = sorted(e.path for e in os.scandir(root) if e.name.endswith(SUFFIX) and not e.name.startswith("."))
    return [] if any(file_index(path) is not None for path in found) else found


def is_locked(path: str) -> bool:
    """True while the connector holds LOCK_EX on ``<file>.lock``, i.e. the file is half-written.

    vLLM's own reader (load_hidden_states) takes LOCK_SH on the same file to wait for the write.
    """
    lock = path + ".lock"
    if not os.path.exists(lock):
        return False
    regular_file(lock, "the connector's lock file")
    with open(lock) as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh, fcntl.LOCK_UN)
    return False


def regular_file(path: str, what: str) -> None:
    """Refuse anything but a regular file before opening it: opening a FIFO named like a
    hidden-state file (or its .lock) waits for a writer forever, and a device reads without end."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the name
        raise BadInput(f"{path}: {what} cannot be read ({first_line(exc)})") from None
    if not stat.S_ISREG(mode):
        kind = "a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "a device or socket"
        raise BadInput(f"{path}: {what} is {kind}, not a regular file; give the files the connector wrote")


def opened(path: str, strict: bool = True) -> tuple[SafetensorsFile, np.ndarray]:
    """A whole connector file (its .lock released) and its token ids (some, when strict)."""
    if is_locked(path):
        raise BadInput(f"{path}: vLLM is still writing it (its .lock is held); wait for the requests to finish")
    regular_file(path, "a hidden-state file")
    f = SafetensorsFile(path)
    missing = {KEY_STATES, KEY_TOKENS} - f.keys
    if missing:
        keys = sorted(f.keys)
        has = ", ".join(keys[:SHOWN_KEYS]) + (f", ... ({len(keys)} tensors)" if len(keys) > SHOWN_KEYS else "")
        raise BadInput(f"{path}: lacks {', '.join(sorted(missing))} (has {has or 'nothing'}); "
                       "not a file of vLLM's ExampleHiddenStatesConnector")
    tokens = as_token_ids(f.tensor(KEY_TOKENS), path, KEY_TOKENS)
    if strict and len(tokens) == 0:
        raise BadInput(f"{path}: holds no tokens (token_ids is empty); remove the file or capture it again")
    return f, tokens


def read_tokens(path: str) -> np.ndarray:
    """Only the token ids of one file (safetensors reads tensors on demand)."""
    return opened(path)[1]


def stored_states(f: SafetensorsFile, num_tokens: int | None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``hidden_states [S', L, H]`` as stored (S' <= S: a prefix-cache hit gives the rows computed; any
    S' where ``num_tokens`` is None) and the per-token scales an FP8 connector stores beside them, if any."""
    states = f.tensor(KEY_STATES)
    if states.ndim != 3:
        raise BadInput(f"{f.path}: hidden_states has shape {tuple(states.shape)}, expected [S, L, H]")
    if num_tokens is not None and states.shape[0] > num_tokens:
        # which row is which token cannot be told: nothing of the file can be compared
        raise BadInput(f"{f.path}: hidden_states has {states.shape[0]} rows for {num_tokens} token ids")
    scales = f.tensor(speculators.SCALES_KEY) if speculators.SCALES_KEY in f.keys else None
    return states, scales


class VllmConnectorLayout(Layout):
    """``{req_id}.safetensors``, one request each, ``[S, L, H]`` in layer order; id N (the pre-norm final)
    is kept apart as the final state, as speculators' ``--include-last-layer`` layout keeps it."""

    name = "vllm"
    described = "vLLM extract_hidden_states <req_id>.safetensors"
    has_default_ids = False  # the ids are the server's eagle_aux_hidden_state_layer_ids: only the user knows them
    stacked = KEY_STATES

    def files(self, path: str) -> list[str]:
        return list_files(path)

    def read(self, ref: SampleRef, mmap: bool = True, strict: bool = True) -> ForeignSample:
        path = ref.path
        f, tokens = opened(path, strict)
        raw, scales = stored_states(f, len(tokens) if strict else None)
        if strict and len(raw) != len(tokens):
            raise BadInput(f"{path}: hidden_states has {len(raw)} rows for {len(tokens)} token ids (a prefix-cache "
                           "hit); capture the folder with `alignprobe capture vllm --from-dir`, which keeps it marked")
        # the audit (not strict) sees FP8 stored without a scale as stored, and says so
        states = speculators.dequantized(raw, scales, path, len(raw)) if strict or scales is not None else raw
        states = as_states(states, path, KEY_STATES, None, 3)
        storage = str(raw.dtype).removeprefix("torch.") if scales is not None else ""
        return ForeignSample(path, None, tokens, None, states.flatten(1), None, int(states.shape[-1]), storage,
                             layout=self.name)

    def read_tokens(self, ref: SampleRef):
        return read_tokens(ref.path), None

    def fit_ids(self, ids: list[int], slices: int, num_layers: int, given: bool) -> IdsFit:
        ordered = sorted(ids)  # the connector stores sorted(set(ids)): layer order (repeats are refused before)
        notes = (f"vLLM stores the slices in layer order: read ids {ids} as {ordered}",) if ordered != ids else ()
        if ordered and ordered[-1] == num_layers and len(ordered) == slices:
            # the last slice is the last layer's pre-norm output: the final state, not an aux slice
            return IdsFit(ordered, slices - 1, tail_final_norm=FINAL_NORM_PRE, notes=notes)
        return IdsFit(ordered, slices, notes=notes)

    def storage_note(self, storage: str) -> str:
        return speculators.LAYOUT.storage_note(storage)

    def lazy_rows(self, ref: SampleRef) -> "speculators.LazyFile | None":
        return speculators.LazyFile.open(ref.path, opened)


LAYOUT = VllmConnectorLayout()
