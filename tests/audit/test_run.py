"""alignprobe audit: every data fault planted in a set of many files, in each layout, found and named;
a clean set passes with nothing above info; the result is the same on a LocalCluster of 2 workers;
a killed audit resumes without reading finished units again."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import xml.etree.ElementTree as ET

import pytest
from click.testing import CliRunner

import alignprobe
from alignprobe.audit import units as audit_units
from alignprobe.audit import cluster as audit_cluster
from alignprobe.cli.main import cli
from audit_datasets import make_samples, recorded_read_ahead, write_dump, write_specforge, write_speculators

FAULTS = {"nan": [3], "zero": [5], "constant": [6], "norm": [7], "repeat": [8], "padding": [9], "rows": [10],
          "duplicate": [11], "template": list(range(12, 22)), "nomask": [21]}
# What each planted fault is named; None where the layout cannot hold the fault (a dump has no padding,
# loss mask or rows/tokens mismatch; speculators files have no loss mask, so no padding either).
EXPECTED = {
    "nan": "nonfinite", "zero": "degenerate", "constant": "degenerate", "norm": "norm_outlier",
    "repeat": "repeated_tap", "padding": "padding_states", "rows": "rows_tokens_mismatch",
    "duplicate": "duplicate_samples", "template": "template_split", "nomask": "empty_loss_mask",
}
CANNOT = {"dump": {"padding", "rows", "nomask"}, "speculators": {"padding", "nomask"}, "specforge": set()}
WRITERS = {"specforge": lambda root, s: write_specforge(root / "sf", s),
           "speculators": lambda root, s: write_speculators(root / "hs", s),
           "dump": lambda root, s: write_dump(root / "d.h5", s)}


@pytest.fixture(scope="module")
def faulty(tmp_path_factory):
    samples = make_samples(40, faults=FAULTS)
    root = tmp_path_factory.mktemp("faulty")
    return {layout: write(root, samples) for layout, write in WRITERS.items()}


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    samples = make_samples(40, seed=1)
    root = tmp_path_factory.mktemp("clean")
    return {layout: write(root, samples) for layout, write in WRITERS.items()}


@pytest.fixture
def small_units(monkeypatch):
    monkeypatch.setattr(audit_units, "UNIT_MAX_FILES", 6)  # many units from 40 files


def named_samples(result, code):
    return {flag.sample for flag in result.samples_flagged if code in flag.codes}


@pytest.mark.parametrize("layout", list(WRITERS))
def test_each_planted_fault_is_found_and_named(faulty, layout, small_units):
    result = alignprobe.audit(faulty[layout])
    assert result.verdict == "FAIL" and result.sources[0].units > 1
    codes = set(result.codes())
    for fault, code in EXPECTED.items():
        if fault in CANNOT[layout]:
            continue
        assert code in codes, (layout, fault, result.codes())
    if layout == "specforge":  # the samples are named too
        assert any("data_3." in s for s in named_samples(result, "nonfinite"))
        assert any("data_8." in s for s in named_samples(result, "repeated_tap"))
        assert any("data_7." in s for s in named_samples(result, "norm_outlier"))
    expected = set(EXPECTED.values()) - {EXPECTED[f] for f in CANNOT[layout]} | {"loss_mask_coverage"}
    if layout != "specforge":
        expected.discard("loss_mask_coverage")
    assert codes == expected, sorted(codes ^ expected)
    split = next(f for f in result.findings if f.code == "template_split")
    assert split.evidence["tokens"] == [107, 108, 109] and split.evidence["samples_with"] == 10


def test_degenerate_and_nonfinite_counts_are_exact(faulty):
    result = alignprobe.audit(faulty["specforge"])
    by_key = {s.key: s for s in result.slices}
    assert by_key["sf:aux:aux[0]"].zero_rows == 3 and by_key["sf:aux:aux[2]"].constant_rows == 2
    assert by_key["sf:aux:aux[1]"].nan_rows == 1 and by_key["sf:aux:aux[1]"].inf_rows == 0


@pytest.mark.parametrize("layout", list(WRITERS))
def test_a_clean_set_reports_nothing_above_info(clean, layout):
    result = alignprobe.audit(clean[layout])
    assert result.verdict == "PASS", [f.title for f in result.findings]
    assert {f.severity for f in result.findings} <= {"info"}


def test_several_paths_at_once_and_a_path_twice(faulty, clean):
    result = alignprobe.audit([clean["dump"], clean["specforge"]])  # the same samples twice, in two layouts
    # (tokens that two prompts share now sit in four samples, twice each: template_split may see them)
    assert len(result.sources) == 2 and result.verdict == "WARN" and "duplicate_samples" in result.codes()
    assert next(f for f in result.findings if f.code == "duplicate_samples").evidence["extra_samples"] == 40
    with pytest.raises(alignprobe.BadInput, match="given twice"):
        alignprobe.audit([clean["dump"], clean["dump"]])


def comparable(result):
    record = dataclasses.asdict(result)
    for key in ("elapsed_s", "workers", "notes", "resumed_units"):
        record.pop(key)
    return json.dumps(record, sort_keys=True, default=str)


@pytest.mark.slow
def test_a_local_cluster_of_two_gives_the_same_result(faulty, small_units, tmp_path):
    distributed = pytest.importorskip("distributed")
    paths = dict(faulty)
    if importlib.util.find_spec("pyarrow"):  # the loss mask from prepare-data's dataset, merged too
        from audit_datasets import write_speculators_prepared

        paths["prepared"] = write_speculators_prepared(tmp_path / "prepared", make_samples(40, faults=FAULTS))
    # the marker in most samples: the samples that lack it are named, across units
    majority = make_samples(40, faults={"template": [i for i in range(40) if not 12 <= i < 22], "nan": [3]})
    paths["majority"] = write_specforge(tmp_path / "majority", majority)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster:
        for layout, path in paths.items():
            here = alignprobe.audit(path)
            there = alignprobe.audit(path, scheduler=cluster.scheduler_address)
            assert here.sources[0].units > 1 and here.verdict == "FAIL"
            assert comparable(here) == comparable(there), layout
            assert here.notes == there.notes, layout
            split = next(f for f in there.findings if f.code == "template_split")
            assert len(split.evidence["examples"]) == 8 and split.evidence["minority_samples"] == 10, layout
    spawned = alignprobe.audit(faulty["dump"], workers=2)  # --workers: a LocalCluster of its own
    assert spawned.workers == 2 and comparable(spawned) == comparable(alignprobe.audit(faulty["dump"]))


def test_a_killed_audit_resumes_without_reading_finished_units(faulty, small_units, tmp_path, monkeypatch):
    journal = tmp_path / "audit.journal.jsonl"
    fresh = alignprobe.audit(faulty["specforge"])
    real_scan, calls = audit_cluster.scan_unit, []

    def dies_on_the_third(unit, *args, **kwargs):
        if len(calls) == 2:
            raise KeyboardInterrupt
        calls.append(unit.key)
        return real_scan(unit, *args, **kwargs)

    monkeypatch.setattr(audit_cluster, "scan_unit", dies_on_the_third)
    with pytest.raises(KeyboardInterrupt):
        alignprobe.audit(faulty["specforge"], journal=journal, threads=1)
    assert len(journal.read_text().splitlines()) == 2
    with open(journal, "a") as fh:
        fh.write('{"v": 1, "unit": "cut sh')  # the line a kill cut short
    read_again = []
    monkeypatch.setattr(audit_cluster, "scan_unit", lambda unit, *a, **k: read_again.append(unit.key) or real_scan(unit, *a, **k))
    resumed = alignprobe.audit(faulty["specforge"], journal=journal)
    assert not set(read_again) & set(calls) and len(read_again) == fresh.sources[0].units - 2
    assert resumed.resumed_units == 2 and comparable(resumed) == comparable(fresh)
    assert not journal.exists()  # removed once the result is in


def test_cli_exit_codes_and_report_files(faulty, clean, tmp_path):
    runner = CliRunner()
    out = runner.invoke(cli, ["audit", faulty["specforge"], "--report", str(tmp_path / "r"), "--no-progress",
                              "--junit", str(tmp_path / "j.xml")])
    assert out.exit_code == 1, out.output
    assert "nonfinite" in out.output and (tmp_path / "r" / "report.html").exists()
    suite = ET.parse(tmp_path / "r" / "junit.xml").getroot()
    failed = {c.get("name") for c in suite.iter("testcase") if c.find("failure") is not None}
    assert {"nonfinite", "repeated_tap", "rows_tokens_mismatch"} <= failed and "template_split" not in failed
    strict = {c.get("name") for c in ET.parse(tmp_path / "j.xml").getroot().iter("testcase") if c.find("failure") is not None}
    assert strict == failed  # --junit without --strict: the same cases
    saved = alignprobe.audit.AuditResult.from_json((tmp_path / "r" / "result.json").read_text())
    assert saved.verdict == "FAIL" and "nonfinite" in saved.codes()
    assert "`nonfinite`" in (tmp_path / "r" / "summary.md").read_text()
    assert runner.invoke(cli, ["audit", clean["dump"], "--no-progress"]).exit_code == 0
    assert runner.invoke(cli, ["audit", clean["specforge"], "--no-progress", "--strict"]).exit_code == 0
    bad = runner.invoke(cli, ["audit", str(tmp_path / "missing"), "--no-progress"])
    assert bad.exit_code == 2 and "no such file" in bad.output
    bad = runner.invoke(cli, ["audit", clean["dump"], "--set", "nope=1", "--no-progress"])
    assert bad.exit_code == 2 and "not an audit setting" in bad.output


def test_cli_json_dash_is_stdout_and_no_journal_named_dash(clean, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = CliRunner().invoke(cli, ["audit", clean["dump"], "--json", "-", "--no-progress"])
    assert out.exit_code == 0, out.stderr
    assert json.loads(out.stdout)["verdict"] == "PASS"  # stdout is the JSON alone; the summary went to stderr
    assert "PASS" in out.stderr and not os.listdir(tmp_path)  # no file "-", no "-.journal"


def test_a_damaged_file_is_named_and_the_rest_read(clean, tmp_path):
    import shutil

    root = tmp_path / "sf"
    shutil.copytree(clean["specforge"], root)
    victim = sorted(root.rglob("data_5.ckpt"))[0]
    victim.write_bytes(victim.read_bytes()[:100])
    result = alignprobe.audit(root)
    assert result.codes()[0] == "unreadable_file" and result.samples == 39
    # the first file in order damaged too: the layout comes from the next readable one
    first = sorted(root.rglob("data_*.ckpt"), key=lambda p: int(p.stem.split("_")[1]))[0]
    first.write_bytes(b"")
    again = alignprobe.audit(root)
    assert again.codes()[0] == "unreadable_file" and again.samples == 38
    assert again.finding("unreadable_file").evidence["files"] == 2


def test_threads_in_this_process_give_the_same_result(faulty, small_units):
    one = alignprobe.audit(faulty["speculators"], threads=1)
    assert comparable(one) == comparable(alignprobe.audit(faulty["speculators"], threads=3))


def test_an_empty_sample_is_named(clean, tmp_path):
    import shutil

    import torch
    from safetensors.torch import save_file

    root = tmp_path / "hs"
    shutil.copytree(clean["speculators"], root)
    save_file({"hidden_states": torch.zeros(0, 4, 32), "token_ids": torch.zeros(0, dtype=torch.long)},
              str(root / "hs_99.safetensors"))
    result = alignprobe.audit(root)
    assert result.codes() == ["empty_sample"] and result.samples == 41


def test_template_split_names_the_smaller_side_on_any_number_of_units(tmp_path, monkeypatch):
    # The marker in 10 of 40 samples: those 10 are named; in 30 of 40: the 10 that lack it are.
    minority = make_samples(40, faults={"template": list(range(12, 22))})
    majority = make_samples(40, faults={"template": [i for i in range(40) if not 12 <= i < 22]})
    for name, samples, side in (("min", minority, "with"), ("maj", majority, "without")):
        root = write_specforge(tmp_path / name, samples)
        results = []
        for files in (512, 6, 1):  # one unit, 7 units, 40 units
            monkeypatch.setattr(audit_units, "UNIT_MAX_FILES", files)
            split = next(f for f in alignprobe.audit(root).findings if f.code == "template_split")
            results.append(split.evidence)
        assert results[0] == results[1] == results[2], name
        evidence = results[0]
        assert evidence["minority"] == side and evidence["minority_samples"] == 10
        named = [e["sample"] for e in evidence["examples"]]
        assert [int(n.split("data_")[1].split(".")[0]) for n in named] == list(range(12, 20)), named


def test_speculators_loss_mask_comes_from_the_prepare_data_dataset(tmp_path, small_units):
    pytest.importorskip("pyarrow")
    from audit_datasets import write_speculators_prepared

    hs = write_speculators_prepared(tmp_path / "prepared", make_samples(40, faults=FAULTS))
    result = alignprobe.audit(hs)
    codes = set(result.codes())
    assert {"padding_states", "empty_loss_mask", "loss_mask_coverage", "tokens_differ_from_dataset"} <= codes
    assert named_samples(result, "padding_states") == {"hs_9.safetensors"}
    assert named_samples(result, "empty_loss_mask") == {"hs_21.safetensors"}
    differ = next(f for f in result.findings if f.code == "tokens_differ_from_dataset")
    assert differ.evidence["samples"] == 1 and differ.evidence["padded"] == 1
    assert not result.notes
    # Without the dataset the audit says so in one note, and runs every other check.
    bare = alignprobe.audit(write_speculators(tmp_path / "alone" / "hs", make_samples(40, faults=FAULTS)))
    assert "empty_loss_mask" not in bare.codes() and len(bare.notes) == 1 and "prepare-data" in bare.notes[0]


def test_a_dump_says_it_keeps_no_loss_mask(faulty):
    notes = alignprobe.audit(faulty["dump"]).notes
    assert len(notes) == 1 and "keep no loss mask" in notes[0]


def test_a_marked_dumps_placeholder_rows_are_not_counted_as_nan(tmp_path):
    """A capture's short sample keeps NaN placeholders outside the rows the engine returned (dump/marks.py):
    the audit reads only the returned rows, names the sample short_rows, and counts only real NaN rows."""
    import numpy as np

    from alignprobe.dump import DumpWriter, Provenance, StreamClaim
    from alignprobe.dump.marks import SampleMark

    g = np.random.default_rng(1)
    H = 16
    claims = {"aux": StreamClaim((2, 4, 5), H, 8, "float32")}
    path = tmp_path / "serve.h5"
    with DumpWriter(str(path), Provenance.here(engine="sglang"), claims) as w:
        for i in range(6):
            rows = g.standard_normal((9 + i, 3 * H)).astype(np.float32)
            mark = None
            if i == 2:  # a radix-cache hit: only the suffix 4.. came back
                rows[:4] = np.nan
                mark = SampleMark(len(rows), (4, len(rows)), 0)
            if i == 4:  # one returned row really is NaN
                rows[3] = np.nan
                mark = SampleMark(len(rows), (0, len(rows)), 1)
            w.add(f"p{i}", list(range(100 + i, 109 + 2 * i)), {"aux": rows}, mark)
    result = alignprobe.audit(str(path))
    short = result.finding("short_rows")
    assert short.severity == "warn" and short.evidence["samples"] == 1 and short.evidence["rows_not_returned"] == 4
    assert short.evidence["examples"][0]["positions_returned"] == "4-10" and "radix" in short.fix.lower() + short.evidence["likely_cause"].lower()
    nan = result.finding("nonfinite")
    assert nan.evidence["samples"] == 1 and sum(v["nan_rows"] for v in nan.evidence["slices"].values()) == 3
    assert "rows_tokens_mismatch" not in result.codes()


def test_a_one_process_audit_reads_ahead_across_its_units(faulty, small_units, monkeypatch):
    """One read-ahead for every unit in turn (readahead.Window): each file read into the page cache
    once, in file order, by one ReadAhead; the result as when each unit reads ahead for itself."""
    made, read = recorded_read_ahead(monkeypatch)
    path = faulty["specforge"]
    across = alignprobe.audit(path)
    files = [f for u in audit_units.plan_units(path) for f in u.files]
    assert across.sources[0].units > 1 and [len(paths) for paths in made] == [len(files)] and read == files
    made.clear()
    per_unit = alignprobe.audit(path, threads=2)  # units scanned at once: each its own read-ahead
    assert len(made) == across.sources[0].units and comparable(per_unit) == comparable(across)
