"""Read foreign hidden-state dumps (every layout in registry.py: SpecForge, speculators, EAGLE ge_data,
Model-Optimizer, TensorRT-LLM SaveState, DeepSpec, vLLM's extract_hidden_states connector) in place, or into alignprobe dumps.

``open_source(path)`` opens any of them (one of ours as it is; a foreign one imported on the way, or
read in place with ``in_place=True``); ``import_source`` writes the import to a file. Each reader says which source version its layout was read from.
"""

from alignprobe.importers.detect import detect_format
from alignprobe.importers.importer import ImportPlan, ImportResult, import_source, plan_import
from alignprobe.importers.folder_source import FolderSource
from alignprobe.importers.source import open_pair, open_source

__all__ = ["FolderSource", "ImportPlan", "ImportResult", "detect_format", "import_source", "open_pair", "open_source",
           "plan_import"]
