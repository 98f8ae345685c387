"""``run_gate(config)``: check the inputs, capture the train side, capture the serve side, compare, write.

The same calls the capture commands make (alignprobe.capture), then ``compare``
and ``write_outputs``; the gate only fixes where each file goes. Both dumps are captured afresh on
every run (a stale dump from an earlier run must never pass a new gate). A run that stops on bad
input still leaves result.json, report/summary.md and the JUnit file (:func:`write_gate_error`).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Callable

from alignprobe.compare.result import CompareResult
from alignprobe.gate.config import GateConfig, layer_list
from alignprobe.report.outputs import Outputs, write_outputs

TRAIN_NAME, SERVE_NAME, JSON_NAME, JUNIT_NAME, REPORT_NAME = "train.h5", "serve.h5", "result.json", "junit.xml", "report"
SUITE = "alignprobe gate"


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


def output_paths(config: GateConfig) -> dict[str, str]:
    """Where a gate run writes, by the flag that names it."""
    paths = {f"--out ({name})": os.path.join(config.out, name) for name in (TRAIN_NAME, SERVE_NAME, REPORT_NAME)}
    paths["--json"] = config.json or os.path.join(config.out, JSON_NAME)
    paths["--junit"] = config.junit or os.path.join(config.out, JUNIT_NAME)
    return paths


def input_paths(config: GateConfig) -> dict[str, str | None]:
    """What a gate run reads, by the flag that names it: never written over or into."""
    return {"--model": config.train.model, "--prompts": config.train.prompts, "--policy": config.policy_file,
            "--vllm-dir": config.serve.vllm_dir, "--vllm-offline-model": config.serve.vllm_offline_model,
            "--sglang-offline-model": config.serve.sglang_offline_model}


def capture_serve(config: GateConfig, train_dump: str, out_path: str, progress: bool = False) -> str:
    """The serve side from the config's one source, the prompts and sample ids of ``train_dump``."""
    s = config.serve
    if s.source in ("sglang_url", "sglang_offline_model"):
        from alignprobe.capture import capture_sglang

        return capture_sglang(out_path, url=s.sglang_url, engine_model=s.sglang_offline_model,
                              engine_python=s.engine_python, engine_options=s.engine_args, tokens_from=train_dump,
                              layer_ids=s.layer_ids, timeout=s.timeout, retries=s.retries, num_layers=s.num_layers,
                              hidden_size=s.hidden_size, arch=s.arch, overwrite=True, progress=progress)
    from alignprobe.capture import capture_vllm

    return capture_vllm(out_path, layer_ids=s.layer_ids or [], from_dir=s.vllm_dir, url=s.vllm_url, served_model=s.vllm_model,
                        offline_model=s.vllm_offline_model, storage_dir=s.vllm_storage_dir,
                        engine_python=s.engine_python, engine_options=s.engine_args or None, tokens_from=train_dump,
                        timeout=s.timeout, num_layers=s.num_layers, overwrite=True, progress=progress)


def run_gate(
    config: GateConfig,
    *,
    progress: bool = False,
    log: Callable[[str], None] = lambda line: None,
    compare_progress: Callable[[int, int], None] | None = None,
    echo: Callable[[str], None] | None = None,
) -> GateRun:
    """Capture both sides into ``config.out``, compare, write result.json, report/ and the JUnit file."""
    from alignprobe.capture import capture_train
    from alignprobe.compare import compare
    from alignprobe.compare.policy import Policy
    from alignprobe.gate.preflight import check_inputs
    from alignprobe.safe_paths import refuse_overlap, refuse_unusable_name

    config.validate()
    refuse_unusable_name(config.out, "--out")
    outputs = output_paths(config)
    refuse_overlap(outputs, input_paths(config))
    policy = Policy.from_file(config.policy_file) if config.policy_file else Policy()
    policy = policy.updated(config.policy) if config.policy else policy
    check_inputs(config)
    os.makedirs(config.out, exist_ok=True)
    train_path = os.path.join(config.out, TRAIN_NAME)
    serve_path = os.path.join(config.out, SERVE_NAME)
    t = config.train
    log(f"gate: capturing the train side with transformers from {t.model}")
    capture_train(t.model, t.prompts, train_path, dtype=t.dtype, device=t.device,
                  trust_remote_code=t.trust_remote_code, limit=t.limit, quiet=not progress,
                  layers=layer_list(t.layers, "train.layers"), aux_layers=layer_list(t.aux_layers, "train.aux_layers"),
                  batch_size=t.batch_size, overwrite=True, progress=progress)
    log(f"gate: capturing the serve side from {getattr(config.serve, config.serve.source)}")
    capture_serve(config, train_path, serve_path, progress)
    log("gate: comparing")
    result = compare(train_path, serve_path, policy, sample=config.sample, max_tokens=config.max_tokens,
                     progress=compare_progress)
    written = write_outputs(result, strict=config.strict, json_path=outputs["--json"],
                            report_dir=outputs[f"--out ({REPORT_NAME})"], junit_path=outputs["--junit"], suite=SUITE,
                            echo=echo)
    return GateRun(result, written, train_path, serve_path)


def write_gate_error(config: GateConfig, message: str, code: int, extra_inputs: dict[str, str | None] | None = None
                     ) -> list[str]:
    """result.json (verdict null, the exit code, the error), report/summary.md and the JUnit file of a
    run that stopped before a result, each where the run would have written it: never over or inside
    an input, nothing for an unusable --out. An earlier run's report in the folder is removed (its
    verdict is not this run's). Returns the paths written; what cannot be written is left out (the one
    line on stderr is the contract, these files a courtesy to CI)."""
    from alignprobe.errors import AlignprobeError
    from alignprobe.report.error_outputs import write_error_outputs
    from alignprobe.report.writer import HTML_NAME, JSON_NAME as REPORT_JSON_NAME
    from alignprobe.safe_json import replaceable_by_json
    from alignprobe.safe_paths import refuse_overlap, refuse_unusable_name

    inputs = {**input_paths(config), **(extra_inputs or {})}
    outputs = output_paths(config)
    written: list[str] = []
    try:
        refuse_unusable_name(config.out, "--out")
        refuse_overlap({"--out": config.out}, inputs)
        os.makedirs(config.out, exist_ok=True)
    except (AlignprobeError, OSError, ValueError):
        return written
    for flag, key in (("--json", "json_path"), (f"--out ({REPORT_NAME})", "report_dir"), ("--junit", "junit_path")):
        path = outputs[flag]
        try:
            refuse_unusable_name(path, flag)
            refuse_overlap({flag: path}, inputs)
            if key == "json_path" and path != "-" and not replaceable_by_json(path):
                continue
            if key == "report_dir":
                for stale in (HTML_NAME, REPORT_JSON_NAME):
                    if os.path.isfile(os.path.join(path, stale)):
                        os.unlink(os.path.join(path, stale))
            written += write_error_outputs(message, code, suite=SUITE, **{key: path})
        except (AlignprobeError, OSError, ValueError):
            continue
    return written
