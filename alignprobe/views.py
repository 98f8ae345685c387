"""How a result is drawn: the report's functions, looked up by name when a result is first drawn.

A result (compare/result.py) never imports the report, which reads results; its plot methods and its
notebook view call :func:`view`, and only then is the report (and matplotlib, slow to import) loaded.
This lookup once was a hook the package root installed on import; now importing nothing wires anything.
"""

from __future__ import annotations

from typing import Any, Callable


def view(name: str) -> Callable[..., Any]:
    """``"repr_html"``, or a figure function of alignprobe.report.figures (``"similarity"``, ...)."""
    if name == "repr_html":
        from alignprobe.report.notebook import repr_html

        return repr_html
    from alignprobe.report import figures

    return getattr(figures, name)
