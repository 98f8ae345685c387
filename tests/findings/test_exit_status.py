"""findings/exit_status.py and severity.py: the verdict of a set of findings, and the exit status a
pipeline gates on."""

from alignprobe.findings import Finding
from alignprobe.findings.exit_status import exit_status
from alignprobe.findings.severity import verdict_of


def test_verdict_and_exit_status():
    warn = Finding("token_shift", "warn", "t")
    error = Finding("layer_offset", "error", "t")
    assert verdict_of([]) == "PASS" and verdict_of(["warn"]) == "WARN" and verdict_of(["info", "error"]) == "FAIL"
    assert exit_status("WARN", [warn]).code == 0 and exit_status("WARN", [warn], strict=True).code == 1
    assert exit_status("FAIL", [warn, error]).reason == "FAIL: layer_offset"
