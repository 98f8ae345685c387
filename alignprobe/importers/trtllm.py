"""TensorRT-LLM's SaveState hidden states: ``{file_prefix}_{iter}.pt``, a list of per-request records.

Read from TensorRT-LLM's source (NVIDIA/TensorRT-LLM): ``SaveHiddenStatesDecodingConfig``
(tensorrt_llm/llmapi/llm_args.py, decoding_type "SaveState": output_directory, file_prefix "data",
write_interval 20, eagle3_layers_to_capture) and the writer (tensorrt_llm/_torch/speculative/
save_hidden_state.py, commits 3e906a0e and 17c59c36):
- every ``write_interval`` requests, ``torch.save`` of a list of dicts to
  ``{output_directory}/{file_prefix}_{iter}.pt``: ``id`` (the request's running number),
  ``input_ids [S]`` (int64), ``hidden_state [S, H]`` (the last H columns of the capture buffer: id -1,
  the post-norm final) and, when more than one layer is captured, ``aux_hidden_states [S, k*H]``
  (``hidden_state_features`` in older versions);
- the buffer's slices follow ``layers_to_capture`` sorted ascending with -1 moved last (default
  (1, N//2-1, N-4) plus -1); the aux tensor drops the -1 slice unless -1 was configured explicitly;
- ``maybe_capture_hidden_states`` stores ``hidden_states + residual`` after decoder layer k
  (models/modeling_llama.py), so id k = HF[k+1], and id N-1 is the last layer's pre-norm output.
No loss mask is written. The layer ids are not in the files: they come from the user or the
defaults (alignprobe.conventions, system ``trtllm``).
"""

from __future__ import annotations

import functools
import os
import re

from alignprobe.dump.schema import FINAL_NORM_POST
from alignprobe.errors import BadInput
from alignprobe.importers.files import is_mapped_checkpoint, load_torch_records
from alignprobe.importers.layout import FileKeys, IdsFit, Layout, SampleRef
from alignprobe.importers.sample import ForeignSample, as_states, as_token_ids

SUFFIX = ".pt"
RECORD_KEYS = {"id", "input_ids", "hidden_state"}
AUX_KEYS = ("aux_hidden_states", "hidden_state_features")  # the newer name first
FINAL_ID = -1  # TensorRT-LLM's id of the post-norm final state
NAME = re.compile(r"^(.*)_(\d+)\.pt$")


def list_files(root: str) -> list[str]:
    """Every ``<prefix>_<iter>.pt`` in ``root`` (or ``root`` itself), by prefix and write iteration."""
    if os.path.isfile(root):
        return [root]
    found = [(m.group(1), int(m.group(2)), e.path) for e in os.scandir(root)
             if e.is_file() and (m := NAME.match(e.name))]
    return [path for _, _, path in sorted(found)]


@functools.lru_cache(maxsize=2)
def _mapped_records(path: str, stamp: tuple[int, int]) -> list[dict]:
    return load_torch_records(path, mmap=True)


def records_of(path: str) -> list[dict]:
    """A file's records, loaded mapped (the pickle read, not the states). A zip checkpoint's mapping is
    kept for the next records read from it, so a file of 20 requests is unpickled once, not 20 times."""
    if not is_mapped_checkpoint(path):
        return load_torch_records(path, mmap=True)  # a legacy pickle is decoded whole: not worth holding
    st = os.stat(path)
    return _mapped_records(path, (st.st_size, st.st_mtime_ns))


class TrtllmLayout(Layout):
    name = "trtllm"
    described = "TensorRT-LLM SaveState <prefix>_<iter>.pt"
    needs_keys = True
    final_norm = FINAL_NORM_POST
    negative_ids = (FINAL_ID,)

    def files(self, path: str) -> list[str]:
        return list_files(path) if os.path.isdir(path) or path.endswith(SUFFIX) else []

    def accepts(self, found: FileKeys | None) -> bool:
        return found is not None and found.records and RECORD_KEYS <= found.keys

    def samples(self, path: str, files: list[str]) -> list[SampleRef]:
        refs = []
        for file in files:
            records = records_of(file)
            share = os.path.getsize(file) // max(1, len(records))
            refs += [SampleRef(file, i, share) for i in range(len(records))]
        return refs

    def read(self, ref: SampleRef, mmap: bool = True, strict: bool = True) -> ForeignSample:
        # always mapped: a file holds up to write_interval requests, and a decoded read of one of them
        # would read all of them (a whole-file read per record: 20x the bytes at the default interval)
        records = records_of(ref.path)
        if ref.record is None or not 0 <= ref.record < len(records):
            raise BadInput(f"{ref}: the file holds {len(records)} records, not this one (it changed?)")
        record = records[ref.record]
        missing = RECORD_KEYS - set(record)
        if missing:
            raise BadInput(f"{ref}: a SaveState record without {', '.join(sorted(missing))} (keys: {sorted(record)})")
        where = str(ref)
        tokens = as_token_ids(record["input_ids"], where, "input_ids")
        rows = len(tokens) if strict else None
        final = as_states(record["hidden_state"], where, "hidden_state", rows, 2)
        key = next((k for k in AUX_KEYS if k in record), None)
        aux = as_states(record[key], where, key, rows, 2) if key else None
        hidden = int(final.shape[-1])
        if strict and aux is not None and aux.shape[-1] % hidden:
            raise BadInput(f"{where}: {key} is {aux.shape[-1]} wide, not a multiple of hidden_state's {hidden}")
        return ForeignSample(where, ref.record, tokens, None, aux, final, hidden, layout=self.name)

    def fit_ids(self, ids: list[int], slices: int, num_layers: int, given: bool) -> IdsFit:
        layers = [i for i in ids if i != FINAL_ID]
        ordered = sorted(layers)
        notes = []
        if ordered != layers:
            notes.append(f"TensorRT-LLM stores the slices in ascending id order: read ids {layers} as {ordered}")
        # -1 configured explicitly keeps the buffer's last slice, the post-norm final, in the aux tensor: a
        # given -1 says so; with the defaults, one slice more than the ids does
        explicit_final = FINAL_ID in ids if given else slices == len(ordered) + 1
        if explicit_final and slices == len(ordered) + 1:
            notes.append("the last aux slice is id -1, the post-norm final (configured explicitly): read as the final state")
            return IdsFit(ordered, len(ordered), tail_final_norm=FINAL_NORM_POST, notes=tuple(notes))
        return IdsFit(ordered, slices, notes=tuple(notes))


LAYOUT = TrtllmLayout()
