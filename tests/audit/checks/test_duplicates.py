"""audit/checks/duplicates.py: samples that repeat another's token ids, in groups."""

from alignprobe.audit.checks.duplicates import Duplicates
from audit_checks import audited, clean_set, sample


def test_samples_with_the_same_token_ids_are_grouped_across_units():
    samples = clean_set(6) + [sample("copy_of_2.ckpt", seed=2), sample("again_2.ckpt", seed=2)]
    assert audited(Duplicates(), clean_set()) == []
    found = audited(Duplicates(), samples, units=4)
    assert [f.code for f in found] == ["duplicate_samples"] and found[0].severity == "warn"
    assert found[0].evidence["extra_samples"] == 2
    assert found[0].evidence["examples"] == [{"count": 3, "samples": ["data_2.ckpt", "copy_of_2.ckpt", "again_2.ckpt"]}]
