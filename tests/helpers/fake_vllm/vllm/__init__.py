"""A stand-in ``vllm`` for the offline path's tests, where the real engine is absent: the names the
driver (probes/engine_side/alignprobe_vllm_driver.py) uses, with what vLLM does behind them.

``LLM(model, speculative_config, kv_transfer_config, **kwargs)``, ``llm.llm_engine.model_config.dtype``,
``llm.generate([{"prompt_token_ids": ids}], SamplingParams(...), use_tqdm=False)``: one output per
prompt whose ``kv_transfer_params["hidden_states_path"]`` names the file the connector wrote, in
vLLM's layout (vLLM example_hidden_states_connector.py): ``hidden_states [S, L, H]`` with L the
eagle_aux_hidden_state_layer_ids in order (id k = HF[k], id N = the last layer's output before the
final norm), ``token_ids [S]`` int64, and the released ``.lock`` beside it. The states come from the
model folder run by transformers in float32.
"""

import os
import types

__version__ = "0.0-fake"


class SamplingParams:
    def __init__(self, **kwargs):
        self.kwargs = kwargs


class LLM:
    def __init__(self, model, speculative_config, kv_transfer_config, **kwargs):
        import torch
        import transformers

        self.ids = speculative_config["draft_model_config"]["hf_config"]["eagle_aux_hidden_state_layer_ids"]
        self.folder = kv_transfer_config["kv_connector_extra_config"]["shared_storage_path"]
        self.model = transformers.AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32).eval()
        self.kwargs = kwargs
        self.llm_engine = types.SimpleNamespace(model_config=types.SimpleNamespace(dtype=torch.float32))

    def generate(self, prompts, sampling_params, use_tqdm=True):
        import torch
        from safetensors.torch import save_file

        n = self.model.config.num_hidden_layers
        outputs = []
        for i, prompt in enumerate(prompts):
            ids = prompt["prompt_token_ids"]
            with torch.no_grad():
                out = self.model(torch.tensor([ids]), output_hidden_states=True)
            prenorm = {}
            hook = self.model.model.norm.register_forward_hook(lambda m, inp, o, prenorm=prenorm: prenorm.setdefault("x", inp[0]))
            with torch.no_grad():
                self.model(torch.tensor([ids]))
            hook.remove()
            picked = [prenorm["x"][0] if k == n else out.hidden_states[k][0] for k in sorted(self.ids)]
            path = os.path.join(self.folder, f"cmpl-fake-{i:04x}-0.safetensors")
            save_file({"hidden_states": torch.stack(picked, dim=1).contiguous(),
                       "token_ids": torch.tensor(ids, dtype=torch.long)}, path)
            open(path + ".lock", "w").close()
            outputs.append(types.SimpleNamespace(kv_transfer_params={"hidden_states_path": path}))
        return outputs
