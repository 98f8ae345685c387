"""Audit a whole training set in place: every sample read once, each data fault named.

``alignprobe.audit(paths)`` (the package is callable, like ``alignprobe.compare``) or
``alignprobe.audit.audit(paths, workers=N)``; see docs/audit.md.
"""

import sys
import types

from alignprobe.audit.policy import AuditPolicy
from alignprobe.audit.result import AuditResult, AuditSource, SampleFlag, SliceAudit
from alignprobe.audit.run import audit

__all__ = ["AuditPolicy", "AuditResult", "AuditSource", "SampleFlag", "SliceAudit", "audit"]


class _CallableModule(types.ModuleType):
    def __call__(self, *args, **kwargs):
        return audit(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
