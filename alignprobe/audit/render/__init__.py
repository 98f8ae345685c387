"""An audit result as files: result.json, summary.md, report.html and junit.xml (compare's set).

Kept apart from the result (the report reads results, never the reverse)."""

from alignprobe.audit.render.writer import AuditReportFiles, write_audit_report

__all__ = ["AuditReportFiles", "write_audit_report"]
