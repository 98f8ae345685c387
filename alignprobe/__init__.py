"""alignprobe: do the hidden states a drafter is served match the ones it was trained on?"""

import os as _os  # noqa: E402
import sys as _sys  # noqa: E402

# The console script imports this package before its own first line runs, and numpy and h5py below
# take a quarter of a second: a Ctrl-C then must already be the one line of cli/interrupt.py (stdlib
# only), not a KeyboardInterrupt traceback. In-process users (a notebook, python -c) are left alone.
if _os.path.basename(_sys.argv[0] if _sys.argv else "") == "alignprobe":
    from alignprobe.cli import interrupt as _interrupt

    _interrupt.install()

from alignprobe.version import __version__  # noqa: E402
from alignprobe.errors import AlignprobeError, BadInput  # noqa: E402
from alignprobe.dump import (  # noqa: E402
    Dump,
    DumpWriter,
    Provenance,
    StreamClaim,
    open_dump,
)
from alignprobe.inspect import DumpSummary, inspect_dump  # noqa: E402
import alignprobe.compare  # noqa: E402,F401 - the package is callable: alignprobe.compare(train, serve)
from alignprobe.compare import CompareResult, Policy  # noqa: E402
import alignprobe.accept  # noqa: E402,F401 - callable too: alignprobe.accept(drafter, train, serve)
from alignprobe.accept import AcceptResult  # noqa: E402


def _report_view(name: str):
    """The report's drawing of a result (imported when first drawn: matplotlib is slow to import)."""
    if name == "repr_html":
        from alignprobe.report.notebook import repr_html

        return repr_html
    from alignprobe.report import figures

    return getattr(figures, name)


alignprobe.compare.result.VIEWS = _report_view  # results never import the report: the root wires them

__all__ = [
    "__version__",
    "AcceptResult",
    "accept",
    "AlignprobeError",
    "BadInput",
    "audit",
    "CompareResult",
    "Dump",
    "DumpWriter",
    "DumpSummary",
    "Policy",
    "compare",
    "Provenance",
    "StreamClaim",
    "inspect_dump",
    "open_dump",
]


def __getattr__(name):
    # alignprobe.audit(paths) works without importing the audit (and torch, which it needs) until used:
    # a CPU comparison of two dumps never imports torch.
    if name == "audit":
        import importlib

        return importlib.import_module("alignprobe.audit")
    raise AttributeError(f"module 'alignprobe' has no attribute {name!r}")
