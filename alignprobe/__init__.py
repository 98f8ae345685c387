"""alignprobe: do the hidden states a drafter is served match the ones it was trained on?

Importing the package has no side effects and loads nothing heavy: each public name is imported when
first used. The console script imports this root before its own first line runs, and numpy and h5py
take a quarter of a second: its Ctrl-C handler (cli/interrupt.py) must be in place before they load.
A CPU comparison of two dumps never imports torch.
"""

from alignprobe.version import __version__

from alignprobe.errors import AlignprobeError, BadInput

# public name -> (module, attribute); attribute None: the module itself (compare and accept are callable)
_LAZY = {
    "Dump": ("alignprobe.dump", "Dump"),
    "DumpWriter": ("alignprobe.dump", "DumpWriter"),
    "Provenance": ("alignprobe.dump", "Provenance"),
    "StreamClaim": ("alignprobe.dump", "StreamClaim"),
    "open_dump": ("alignprobe.dump", "open_dump"),
    "DumpSummary": ("alignprobe.inspect", "DumpSummary"),
    "inspect_dump": ("alignprobe.inspect", "inspect_dump"),
    "compare": ("alignprobe.compare", None),  # alignprobe.compare(train, serve)
    "CompareResult": ("alignprobe.compare", "CompareResult"),
    "Policy": ("alignprobe.compare", "Policy"),
    "accept": ("alignprobe.accept", None),  # alignprobe.accept(drafter, train, serve)
    "AcceptResult": ("alignprobe.accept", "AcceptResult"),
    "audit": ("alignprobe.audit", None),  # alignprobe.audit(paths); needs torch
}

__all__ = ["__version__", "AlignprobeError", "BadInput", *_LAZY]


def __getattr__(name):
    if name not in _LAZY:
        raise AttributeError(f"module 'alignprobe' has no attribute {name!r}")
    import importlib

    module_name, attribute = _LAZY[name]
    module = importlib.import_module(module_name)
    return module if attribute is None else getattr(module, attribute)


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
