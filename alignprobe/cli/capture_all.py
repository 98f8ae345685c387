"""The `capture` group with every backend attached (each backend's file adds its subcommand)."""

from alignprobe.cli.capture import capture
import alignprobe.cli.capture_llamacpp  # noqa: E402,F401 - attaches `capture llamacpp`
import alignprobe.cli.capture_sglang  # noqa: E402,F401 - attaches `capture sglang`
import alignprobe.cli.capture_vllm  # noqa: E402,F401 - attaches `capture vllm`

__all__ = ["capture"]
