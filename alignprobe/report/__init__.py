"""Turn a CompareResult into something a person reads: an HTML report, a CI summary, figures.

``write_report(result, out_dir)`` writes report.html (self-contained), summary.md and result.json;
``alignprobe.report.figures`` draws single plots, ``alignprobe.report.notebook`` the notebook view.
"""

from alignprobe.report.writer import ReportFiles, report_figures, write_report

__all__ = ["ReportFiles", "report_figures", "write_report"]
