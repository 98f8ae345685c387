"""Scripts that run inside a serving engine's own Python, not alignprobe's.

An engine usually lives in a venv of its own (vLLM and SGLang pin their own torch), so alignprobe
starts these files there as subprocesses. They import only the engine, numpy, safetensors and the
standard library: never alignprobe. ``ENGINE_SIDE_DIR`` goes on the engine's PYTHONPATH, so the
vLLM connector below can be loaded by module path (``kv_connector_module_path``).
"""

import os

ENGINE_SIDE_DIR = os.path.dirname(os.path.abspath(__file__))
VLLM_DRIVER = os.path.join(ENGINE_SIDE_DIR, "alignprobe_vllm_driver.py")
SGLANG_DRIVER = os.path.join(ENGINE_SIDE_DIR, "alignprobe_sglang_driver.py")
LLAMACPP_DRIVER = os.path.join(ENGINE_SIDE_DIR, "alignprobe_llamacpp_driver.py")
