"""``alignprobe compare``: exit codes, --json, --strict, --set, and one-line errors."""

import json
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from alignprobe.cli.main import cli
from alignprobe.compare import CompareResult
from compare_helpers import make_samples, write_serve, write_train


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    samples = make_samples(num=4, length=24)
    return {
        "train": write_train(d / "train.h5", samples),
        "clean": write_serve(d / "clean.h5", samples),
        "offset": write_serve(d / "offset.h5", samples, taps=(3, 4, 5)),
        "unpaired": write_serve(d / "unpaired.h5", samples, skip=("s03",)),
    }


def _run(*args):
    return CliRunner().invoke(cli, ["compare", *args])


def test_pass_fail_and_json(tmp_path, dumps):
    ok = _run("--train-dump", dumps["train"], "--serve-dump", dumps["clean"])
    assert ok.exit_code == 0 and "alignprobe compare: PASS" in ok.output
    out = tmp_path / "r.json"
    bad = _run("--train-dump", dumps["train"], "--serve-dump", dumps["offset"], "--json", str(out))
    assert bad.exit_code == 1 and "layer_offset" in bad.output
    raw = json.loads(out.read_text())
    assert raw["verdict"] == "FAIL" and raw["findings"][0]["code"] == "layer_offset"
    assert CompareResult.from_dict(raw).findings[0].evidence["shift"] == 1
    assert len(bad.output.splitlines()) < 45  # one screen


def test_warn_passes_unless_strict(dumps):
    args = ("--train-dump", dumps["train"], "--serve-dump", dumps["unpaired"])
    warn = _run(*args)
    assert warn.exit_code == 0 and "WARN" in warn.output and "sample_mismatch" in warn.output
    assert _run(*args, "--strict").exit_code == 1
    assert _run(*args, "--set", "severity.sample_mismatch=error").exit_code == 1
    assert _run(*args, "--set", "severity.sample_mismatch=info", "--strict").exit_code == 0


def test_policy_file_flag(tmp_path, dumps):
    policy = tmp_path / "p.toml"
    policy.write_text('[severity]\nlayer_offset = "warn"\n')
    r = _run("--train-dump", dumps["train"], "--serve-dump", dumps["offset"], "--policy", str(policy))
    assert r.exit_code == 0 and "WARN" in r.output


@pytest.mark.parametrize(
    "args, message",
    [
        (["--serve-dump", "x.h5"], "Missing option"),
        (["--train-dump", "absent.h5", "--serve-dump", "absent2.h5"], "no such file"),
        (["--set", "nokey"], "KEY=VALUE"),
        (["--set", "bogus=1"], "unknown key"),
        (["--sample", "0"], "sample"),
    ],
)
def test_bad_input_exits_2_with_one_line(dumps, args, message):
    base = ["--train-dump", dumps["train"], "--serve-dump", dumps["clean"]]
    r = _run(*(base + args if args[0] != "--serve-dump" and "absent.h5" not in args else args))
    assert r.exit_code == 2, r.output
    assert message in r.output and "Traceback" not in r.output


def test_json_path_may_not_be_an_input(dumps):
    r = _run("--train-dump", dumps["train"], "--serve-dump", dumps["clean"], "--json", dumps["clean"])
    assert r.exit_code == 2 and "never writes over its inputs" in r.output


def test_real_process_exit_code_and_untouched_inputs(dumps):
    before = open(dumps["clean"], "rb").read()
    proc = subprocess.run(
        [sys.executable, "-m", "alignprobe.cli.main", "compare", "--train-dump", dumps["train"], "--serve-dump",
         dumps["offset"]],
        capture_output=True, text=True,
    )
    assert proc.returncode == 1 and "layer_offset" in proc.stdout
    assert open(dumps["clean"], "rb").read() == before
    np.testing.assert_equal(proc.stderr, "")


def test_compare_to_json_loads_neither_matplotlib_nor_torch(tmp_path, dumps):
    # matplotlib (0.5 s, ~80 MB) is for the report's plots, torch for foreign sources and GPUs
    code = (
        "import sys; from alignprobe.cli.main import main; sys.argv = ['alignprobe', 'compare', '--train-dump', "
        f"{dumps['train']!r}, '--serve-dump', {dumps['clean']!r}, '--json', {str(tmp_path / 'r.json')!r}, '--quiet']\n"
        "try:\n    main()\nexcept SystemExit as stop:\n"
        "    print(stop.code, [m for m in ('matplotlib', 'torch') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[-1] == "0 []"
