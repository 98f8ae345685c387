"""audit/render/markdown.py: summary.md, whose tables hold whatever paths and titles the audit met."""

from alignprobe.audit.render.markdown import render_markdown
from alignprobe.audit.result import AuditResult, AuditSource
from alignprobe.findings.make import make


def test_a_pipe_or_a_tag_in_a_path_or_title_stays_in_its_cell():
    finding = make("unreadable_file", "data|v2/a<b>.ckpt: not a checkpoint", {"files": 1}, "re-run the <dump> | step")
    result = AuditResult("FAIL", [finding], [AuditSource("data|v2", "specforge", 1, 1)], [], [], 1, 8, 64, 0, 0, {},
                         notes=["a | note"])
    text = render_markdown(result)
    row = next(line for line in text.splitlines() if "`unreadable_file`" in line)
    assert row.count("|") - row.count("\\|") == 4  # three cells: severity, code, finding
    assert "<b>" not in text and "<dump>" not in text
