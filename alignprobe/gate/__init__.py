"""``alignprobe gate``: the pre-training check in one call (config.py says what, run.py does it)."""

from alignprobe.gate.config import GateConfig, ServeSide, TrainSide, config_from_dict, load_config
from alignprobe.gate.run import GateRun, run_gate

__all__ = ["GateConfig", "GateRun", "ServeSide", "TrainSide", "config_from_dict", "load_config", "run_gate"]
