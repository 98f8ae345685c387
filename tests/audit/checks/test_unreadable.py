"""audit/checks/unreadable.py: files the runner could not read, each named with its reason (the rest
are read)."""

from alignprobe.audit.checks.unreadable import Unreadable


def test_each_failed_file_is_counted_and_named_across_units():
    check = Unreadable()
    merged, first, second = check.empty(), check.empty(), check.empty()
    check.failed(first, "/data/set/data_3.ckpt", "not a zip file")
    check.failed(second, "/data/set/data_9.ckpt", "truncated")
    check.merge(merged, first)
    check.merge(merged, second)
    from alignprobe.audit.policy import AuditPolicy

    found = check.findings(merged, AuditPolicy())
    assert [f.code for f in found] == ["unreadable_file"] and found[0].severity == "error"
    assert found[0].evidence["files"] == 2
    assert [e["file"] for e in found[0].evidence["examples"]] == ["/data/set/data_3.ckpt", "/data/set/data_9.ckpt"]
    assert check.findings(check.empty(), AuditPolicy()) == []
