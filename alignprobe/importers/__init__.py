"""Read foreign hidden-state dumps (SpecForge, speculators, EAGLE ge_data) into alignprobe dumps.

``open_for_reading(path)`` reads any of them in place (or opens one of ours); ``open_source(path)``
opens it as a Dump, imported on the way; ``import_source`` writes the import to a file. Each reader says which source version its layout was read from.
"""

from alignprobe.importers.detect import detect_format
from alignprobe.importers.importer import ImportPlan, ImportResult, import_source, plan_import
from alignprobe.importers.folder_source import FolderSource
from alignprobe.importers.source import open_for_reading, open_pair, open_source

__all__ = ["FolderSource", "ImportPlan", "ImportResult", "detect_format", "import_source", "open_for_reading", "open_pair",
           "open_source", "plan_import"]
