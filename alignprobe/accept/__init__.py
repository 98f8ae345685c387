"""Predict a drafter's accept length on the train and the serve hidden states (docs/accept.md).

``alignprobe.accept(drafter, train_dump, serve_dump, target=None)`` is the library call (the package
is callable, as ``alignprobe.compare`` is); it returns an :class:`AcceptResult`.
"""

import sys
import types

from alignprobe.accept.checkpoint import DrafterCheckpoint, load_drafter
from alignprobe.accept.result import AcceptResult, SideAccept
from alignprobe.accept.run import accept

__all__ = ["AcceptResult", "DrafterCheckpoint", "SideAccept", "accept", "load_drafter"]


class _CallableModule(types.ModuleType):
    def __call__(self, *args, **kwargs):
        return accept(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
