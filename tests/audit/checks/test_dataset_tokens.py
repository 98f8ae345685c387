"""audit/checks/dataset_tokens.py: speculators states files whose token ids are not their prepare-data
row's (the trainer skips them)."""

from alignprobe.audit.checks.dataset_tokens import DatasetTokens
from audit_checks import audited, clean_set, sample


def test_files_whose_ids_differ_from_their_dataset_row_are_named():
    samples = clean_set(3) + [sample("hs_7.safetensors", dataset_mismatch=(10, 12), padding=2)]
    assert audited(DatasetTokens(), clean_set()) == []
    found = audited(DatasetTokens(), samples)
    assert [f.code for f in found] == ["tokens_differ_from_dataset"] and found[0].severity == "warn"
    assert found[0].evidence["padded"] == 1
    assert found[0].evidence["examples"] == [{"sample": "hs_7.safetensors", "dataset_tokens": 10, "file_tokens": 12,
                                              "padded": True}]
