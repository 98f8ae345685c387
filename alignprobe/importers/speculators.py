"""speculators' offline hidden states: ``hs_<idx>.safetensors`` files.

Read from speculators' source (vllm-project/speculators c05b95b, 2026-08-20):
- scripts/data_generation_offline.py moves the file vLLM's hidden-states connector wrote for a
  request to ``{out}/hidden_states/hs_{idx}.safetensors``; src/speculators/data_generation/offline.py
  checks it holds ``token_ids [S]`` and ``hidden_states [S, L, H]``.
- scripts/launch_vllm.py sets vLLM's ``eagle_aux_hidden_state_layer_ids`` to the target layer ids
  (default ``[2, N//2, N-3]``) with ``num_hidden_layers`` appended (--include-last-layer, default on):
  L = 4 slices, the last the pre-norm output of the last layer (vLLM numbering: id k = HF[k]).
"""

from __future__ import annotations


from alignprobe.errors import BadInput
from alignprobe.importers.files import SafetensorsFile, file_index, numbered_files
from alignprobe.importers.sample import ForeignSample, as_states, as_token_ids

SUFFIX = ".safetensors"


def list_files(root: str) -> list[str]:
    """Every ``hs_<idx>.safetensors`` under ``root`` (or ``root`` itself), by sample index."""
    return numbered_files(root, "hs_", (SUFFIX,))


def read(path: str) -> ForeignSample:
    f = SafetensorsFile(path)
    missing = {"token_ids", "hidden_states"} - f.keys
    if missing:
        raise BadInput(
            f"{path}: not a speculators hidden-state file: missing {', '.join(sorted(missing))} "
            f"(keys: {', '.join(sorted(f.keys)) or 'none'})"
        )
    tokens = as_token_ids(f.tensor("token_ids"), path, "token_ids")
    states = as_states(f.tensor("hidden_states"), path, "hidden_states", len(tokens), 3)  # [S, L, H]
    hidden = int(states.shape[-1])
    return ForeignSample(path, file_index(path), tokens, None, states.reshape(len(tokens), -1), None, hidden)
