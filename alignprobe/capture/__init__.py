"""One capture orchestration: what `alignprobe capture ...` and `alignprobe gate` both call.

The backends (alignprobe.probes) each capture one way; these functions choose the backend for a
source, check the source once, and record the same provenance, so a command line and a gate config
that name the same source capture the same dump.

    train.py   capture_train: a local transformers model folder and a prompts file (capture hf)
    vllm.py    capture_vllm: connector files, a running server, or an offline vllm.LLM in its own Python
    sglang.py  capture_sglang: a running SGLang server, or an offline sglang.Engine in its own Python
    llamacpp.py capture_llamacpp: a GGUF model run through llama-cpp-python in its own Python
"""

from alignprobe.capture.llamacpp import capture_llamacpp
from alignprobe.capture.sglang import capture_sglang
from alignprobe.capture.train import capture_train
from alignprobe.capture.vllm import capture_vllm

__all__ = ["capture_llamacpp", "capture_sglang", "capture_train", "capture_vllm"]
