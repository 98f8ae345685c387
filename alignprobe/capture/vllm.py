"""``capture_vllm``: the hidden states vLLM's extract_hidden_states connector writes, from one of three sources.

    from_dir        files the connector already wrote (a shared folder)
    url + model     a running vLLM server, sent the prompts; it writes the files
    offline_model   vllm.LLM run offline in vLLM's own Python (engine_python), writing into storage_dir

The prompts come from ``tokens_from`` (a dump of the same prompts, whose sample ids the files take)
or ``prompts_path`` (a JSONL of input_ids); a folder of files needs neither, but matches by token ids
when ``tokens_from`` is given.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

from alignprobe.errors import BadInput


def capture_vllm(
    out_path: str | os.PathLike,
    *,
    layer_ids: Sequence[int],
    from_dir: str | os.PathLike | None = None,
    url: str | None = None,
    served_model: str | None = None,
    offline_model: str | os.PathLike | None = None,
    storage_dir: str | os.PathLike | None = None,
    engine_python: str | os.PathLike | None = None,
    engine_options: Mapping[str, Any] | None = None,
    tokens_from: str | os.PathLike | None = None,
    prompts_path: str | os.PathLike | None = None,
    timeout: float = 120.0,
    **capture_options: Any,
) -> str:
    """Capture from one vLLM source into ``out_path``; returns its path.

    ``engine_options`` go to ``vllm.LLM(...)`` (dtype, max_model_len, enforce_eager, any keyword);
    ``capture_options`` to :func:`alignprobe.probes.vllm_files.capture_vllm_files` (num_layers,
    stream_role, resume, overwrite, progress)."""
    from alignprobe.probes.vllm_files import capture_vllm_files
    from alignprobe.safe_paths import input_dir, input_file, input_path, output_file, refuse_overlap

    if sum(x is not None for x in (from_dir, url, offline_model)) != 1:
        raise BadInput("give exactly one of --from-dir, --url or --offline-model")
    refuse_overlap({"--out": output_file(out_path, "--out")},
                   {"--from-dir": from_dir and input_dir(from_dir, "connector folder"),
                    "--tokens-from": tokens_from and input_path(tokens_from, "dump or training-set folder"),
                    "--prompts": prompts_path and input_file(prompts_path, "prompt file"),
                    "--offline-model": offline_model, "--storage-dir": storage_dir})
    if isinstance(layer_ids, str) or not layer_ids:
        raise BadInput("--layer-ids takes the ids vLLM ran with, e.g. 2,30,58,61")
    if offline_model is None and (engine_options or engine_python):
        raise BadInput("--engine-python, --dtype, --max-model-len, --enforce-eager and --engine-arg go with --offline-model")
    source: "str | os.PathLike | Sequence[str] | None" = from_dir
    prompts, provenance = None, None
    if from_dir is None:
        prompts = _prompts(tokens_from, prompts_path, capture_options.get("num_layers"))
        if url is not None:
            from alignprobe.probes.vllm_drive import request_files

            if not served_model:
                raise BadInput("--url needs --model, the name the server serves the model under")
            source = request_files(url, served_model, prompts, timeout=timeout)
            provenance = {"model": served_model, "capture": {"server": url}}
        elif offline_model is not None:  # the one source left (exactly one was checked above)
            from alignprobe.probes.vllm_drive import generate_offline

            if not storage_dir:
                raise BadInput("--offline-model needs --storage-dir, where vLLM writes its files")
            model = os.fspath(offline_model)
            run = generate_offline(model, prompts, layer_ids, os.fspath(storage_dir),
                                   python=os.fspath(engine_python) if engine_python else None,
                                   engine_options=engine_options)
            source = run.paths
            provenance = {"model": model, "dtype": run.dtype, "engine_version": run.vllm_version,
                          "capture": {"engine_options": run.engine_options, "engine_start_s": round(run.start_s, 2),
                                      "engine_generate_s": round(run.generate_s, 3)}}
    assert source is not None  # exactly one source was checked above
    return capture_vllm_files(source, out_path, layer_ids=layer_ids, tokens_from=tokens_from, prompts=prompts,
                              provenance=provenance, **capture_options)


def _prompts(tokens_from, prompts_path, num_layers=None):
    if (tokens_from is None) == (prompts_path is None):
        raise BadInput("give exactly one of --tokens-from DUMP or --prompts JSONL for the prompts to send")
    if tokens_from is not None:
        from alignprobe.probes.dump_prompts import prompts_from_dump

        return prompts_from_dump(tokens_from, num_layers=num_layers).prompts
    from alignprobe.probes.prompts import load_prompts

    return load_prompts(prompts_path).prompts
