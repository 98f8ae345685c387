"""Try SGLang's own EAGLE3 speculative decoding on CPU and print its accept length as one JSON line.

Runs under the SGLang venv's python (SGLANG_USE_CPU_ENGINE=1; on a machine without CUDA the
libcuda stub of ../shared notes on LD_LIBRARY_PATH):
    python accept_sglang_run.py TARGET DRAFTER
Greedy, k=3 (speculative_num_steps 3, eagle topk 1, 4 draft tokens: a chain, as vLLM's), four
seeded byte prompts as token ids. Prints RESULT {...} with SGLang's accept length (completion
tokens / verify rounds), or exits non-zero with the engine's error.
"""

import json
import sys


def main() -> None:
    import sglang

    target, drafter = sys.argv[1], sys.argv[2]
    engine = sglang.Engine(model_path=target, device="cpu", attention_backend="torch_native", dtype="float32",
                           disable_cuda_graph=True, disable_radix_cache=True, disable_overlap_schedule=True,
                           mem_fraction_static=0.1, max_total_tokens=4096, max_running_requests=4, skip_server_warmup=True,
                           speculative_algorithm="EAGLE3", speculative_draft_model_path=drafter,
                           speculative_num_steps=3, speculative_eagle_topk=1, speculative_num_draft_tokens=4)
    prompts = [[(7 * i + j) % 256 for j in range(24)] for i in range(4)]
    outs = engine.generate(input_ids=prompts, sampling_params={"max_new_tokens": 48, "temperature": 0, "ignore_eos": True})
    verify = [o["meta_info"].get("spec_verify_ct") for o in outs]
    lengths = [o["meta_info"].get("completion_tokens") for o in outs]
    accept = sum(lengths) / sum(verify) if all(verify) else None
    print("RESULT", json.dumps({"accept_length": accept, "spec_verify_ct": verify, "completion_tokens": lengths}), flush=True)
    engine.shutdown()


if __name__ == "__main__":
    main()
