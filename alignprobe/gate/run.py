"""``run_gate(config)``: capture the train side, capture the serve side, compare, write the outputs.

The same calls a notebook makes by hand (``capture_hf``, ``capture_sglang`` / ``capture_vllm_files``,
``compare``, ``write_outputs``); the gate only fixes where each file goes. Both dumps are captured
afresh on every run (a stale dump from an earlier run must never pass a new gate).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Callable

from alignprobe.compare.result import CompareResult
from alignprobe.gate.config import GateConfig, layer_list
from alignprobe.report.outputs import Outputs, write_outputs

TRAIN_NAME, SERVE_NAME, JSON_NAME, REPORT_NAME = "train.h5", "serve.h5", "result.json", "report"


@dataclasses.dataclass
class GateRun:
    result: CompareResult
    outputs: Outputs
    train_dump: str
    serve_dump: str

    @property
    def exit_code(self) -> int:
        return self.outputs.status.code

    def __bool__(self) -> bool:
        return bool(self.outputs.status)


def capture_train(config: GateConfig, out_path: str, progress: bool = False) -> str:
    from alignprobe.probes.hf import capture_hf, load_hf_model
    from alignprobe.probes.prompts import load_prompts

    t = config.train
    model, tokenizer = load_hf_model(t.model, dtype=t.dtype, device=t.device, trust_remote_code=t.trust_remote_code)
    prompt_set = load_prompts(t.prompts, tokenizer, limit=t.limit)
    return capture_hf(
        model, prompt_set.prompts, out_path, layers=layer_list(t.layers, "train.layers"),
        aux_layers=layer_list(t.aux_layers, "train.aux_layers"), batch_size=t.batch_size, overwrite=True,
        progress=progress, provenance={"model": t.model, "capture": prompt_set.provenance()},
    )


def capture_serve(config: GateConfig, train_dump: str, out_path: str, progress: bool = False) -> str:
    s = config.serve
    source = s.source
    if source == "sglang_url":
        from alignprobe.probes.sglang_http import capture_sglang

        return capture_sglang(s.sglang_url, train_dump, out_path, timeout=s.timeout, retries=s.retries,
                              layer_ids=s.layer_ids, num_layers=s.num_layers, hidden_size=s.hidden_size, arch=s.arch,
                              overwrite=True, progress=progress)
    from alignprobe.probes.vllm_files import capture_vllm_files

    files, prompts = s.vllm_dir, None
    if source != "vllm_dir":
        from alignprobe.probes.dump_prompts import prompts_from_dump
        from alignprobe.probes import vllm_drive

        prompts = prompts_from_dump(train_dump).prompts
        if source == "vllm_url":
            files = vllm_drive.request_files(s.vllm_url, s.vllm_model, prompts, timeout=s.timeout)
        else:
            files = vllm_drive.generate_offline(s.vllm_offline_model, prompts, s.layer_ids, s.vllm_storage_dir)
    return capture_vllm_files(files, out_path, layer_ids=s.layer_ids, num_layers=s.num_layers, tokens_from=train_dump,
                              prompts=prompts, overwrite=True, progress=progress)


def run_gate(
    config: GateConfig,
    *,
    progress: bool = False,
    log: Callable[[str], None] = lambda line: None,
    compare_progress: Callable[[int, int], None] | None = None,
    echo: Callable[[str], None] | None = None,
) -> GateRun:
    """Capture both sides into ``config.out``, compare, write result.json, report/ (and the JUnit file)."""
    from alignprobe.compare import compare
    from alignprobe.compare.policy import Policy

    config.validate()
    _refuse_outputs_over_inputs(config)
    policy = Policy.from_file(config.policy_file) if config.policy_file else Policy()
    policy = policy.updated(config.policy) if config.policy else policy
    os.makedirs(config.out, exist_ok=True)
    train_path = os.path.join(config.out, TRAIN_NAME)
    serve_path = os.path.join(config.out, SERVE_NAME)
    log(f"gate: capturing the train side with transformers from {config.train.model}")
    capture_train(config, train_path, progress)
    log(f"gate: capturing the serve side from {getattr(config.serve, config.serve.source)}")
    capture_serve(config, train_path, serve_path, progress)
    log("gate: comparing")
    result = compare(train_path, serve_path, policy, sample=config.sample, max_tokens=config.max_tokens,
                     progress=compare_progress)
    outputs = write_outputs(
        result, strict=config.strict, json_path=config.json or os.path.join(config.out, JSON_NAME),
        report_dir=os.path.join(config.out, REPORT_NAME), junit_path=config.junit, suite="alignprobe gate", echo=echo,
    )
    return GateRun(result, outputs, train_path, serve_path)


def _refuse_outputs_over_inputs(config: GateConfig) -> None:
    """The gate writes into ``config.out`` (and --json/--junit): never over or inside the model folder,
    the prompts, the policy or vLLM's files (safe_paths)."""
    from alignprobe.safe_paths import refuse_unusable_name, refuse_overlap

    refuse_unusable_name(config.out, "--out")
    outputs = {f"--out ({name})": os.path.join(config.out, name) for name in (TRAIN_NAME, SERVE_NAME, REPORT_NAME)}
    outputs.update({"--json": config.json or os.path.join(config.out, JSON_NAME), "--junit": config.junit})
    refuse_overlap(outputs, {"--model": config.train.model, "--prompts": config.train.prompts,
                             "--policy": config.policy_file, "--vllm-dir": config.serve.vllm_dir})
