"""Numbers out of range: tolerances (negative, NaN, infinite, cosines outside [-1, 1], too large for
a float) from --set and from policy files, --timeout nan, --limit 0 and the other counts."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, strategies as st

from alignprobe.compare.policy import Policy
from bad_input_helpers import FUZZ, assert_refused, invoke
from dump_helpers import H, claims, random_samples, write

COSINES = ["drift_warn_cosine_p1", "drift_fail_cosine_p1", "scale_min_cosine", "mapping_min_cosine"]
NON_NEGATIVE = ["drift_warn_rel_rms", "drift_fail_rel_rms", "scale_tolerance", "mapping_min_margin",
                "mapping_tie_cosine", "degenerate_fail_fraction"]


def out_of_range(key: str):
    """Values no tolerance ``key`` can take."""
    always = st.sampled_from([math.nan, math.inf, -math.inf])
    if key in COSINES:
        return st.one_of(always, st.floats(1.0, 1e300, exclude_min=True), st.floats(-1e300, -1.0, exclude_max=True))
    if key == "position_growth":
        return st.one_of(always, st.floats(-1e300, 1.0, exclude_max=True))
    if key == "degenerate_fail_fraction":
        return st.one_of(always, st.floats(1.0, 1e300, exclude_min=True), st.floats(-1e300, 0.0, exclude_max=True))
    return st.one_of(always, st.floats(-1e300, 0.0, exclude_max=True))


bad_setting = st.sampled_from(COSINES + NON_NEGATIVE + ["position_growth"]).flatmap(
    lambda key: st.tuples(st.just(key), out_of_range(key)))


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    folder = tmp_path_factory.mktemp("dumps")
    a = write(folder / "a.h5", random_samples([5, 7], {"aux": 3 * H, "final": H}), claims())
    b = write(folder / "b.h5", random_samples([5, 7], {"aux": 3 * H, "final": H}, seed=1), claims())
    return a, b


@FUZZ
@given(setting=bad_setting)
def test_set_refuses_out_of_range_tolerances(dumps, setting):
    key, value = setting
    a, b = dumps
    assert_refused(["compare", "--train-dump", a, "--serve-dump", b, "--set", f"{key}={value!r}"], [a, b])


@FUZZ
@given(setting=bad_setting, huge_int=st.booleans(), kind=st.sampled_from(["json", "toml"]))
def test_policy_files_refuse_out_of_range_tolerances(tmp_path_factory, dumps, setting, huge_int, kind):
    key, value = setting
    folder = tmp_path_factory.mktemp("policy")
    if huge_int:
        literal = "1" + "0" * 400  # an integer too large for a float
    elif math.isnan(value):
        literal = "NaN" if kind == "json" else "nan"
    elif math.isinf(value):
        literal = ("-" if value < 0 else "") + ("Infinity" if kind == "json" else "inf")
    else:
        literal = repr(value)
    path = folder / f"p.{kind}"
    path.write_text('{"%s": %s}' % (key, literal) if kind == "json" else f"{key} = {literal}\n")
    a, b = dumps
    assert_refused(["compare", "--train-dump", a, "--serve-dump", b, "--policy", path], [a, b, path])


def test_policy_in_range_still_accepted():
    Policy(drift_warn_cosine_p1=1.0, drift_fail_cosine_p1=-1.0, position_growth=1.0, degenerate_fail_fraction=0.0)
    with pytest.raises(Exception, match="out of range"):
        Policy(scale_tolerance=-0.1)


bad_seconds = st.sampled_from(["nan", "inf", "-inf", "0", "-1", "-0.5", "1e999", "abc", ""])
bad_count = st.one_of(st.integers(-10**6, 0).map(str), st.sampled_from(["1.5", "x", "", "1e3"]))


@FUZZ
@given(flag=st.sampled_from(["sglang", "vllm"]), seconds=bad_seconds)
def test_timeouts_must_be_positive_and_finite(tmp_path_factory, flag, seconds):
    folder = tmp_path_factory.mktemp("t")
    prompts = folder / "p.jsonl"
    prompts.write_text(json.dumps({"input_ids": [1, 2]}) + "\n")
    args = ["capture", flag, "--url", "http://127.0.0.1:9", "--prompts", prompts, "--out", folder / "o.h5",
            "--timeout", seconds]
    if flag == "vllm":
        args += ["--model", "m", "--layer-ids", "1,2"]
    assert_refused(args, [prompts])


@FUZZ
@given(flag=st.sampled_from(["--limit", "--batch-size", "--shard-tokens", "--group-size"]), value=bad_count)
def test_capture_hf_counts_must_be_positive(tmp_path_factory, flag, value):
    folder = tmp_path_factory.mktemp("c")
    prompts = folder / "p.jsonl"
    prompts.write_text(json.dumps({"input_ids": [1, 2]}) + "\n")
    args = ["capture", "hf", "--model", folder, "--prompts", prompts, "--out", folder / "o.h5", flag, value]
    line = assert_refused(args, [prompts])
    assert flag in line


@FUZZ
@given(value=bad_count)
def test_vllm_max_model_len_must_be_positive(tmp_path_factory, value):
    # it went to vLLM as given (0 or -5 tokens), to fail there after the engine's start
    folder = tmp_path_factory.mktemp("v")
    prompts = folder / "p.jsonl"
    prompts.write_text(json.dumps({"input_ids": [1, 2]}) + "\n")
    assert_refused(["capture", "vllm", "--offline-model", folder, "--storage-dir", folder / "hs", "--layer-ids", "1,2",
                    "--prompts", prompts, "--out", folder / "o.h5", "--max-model-len", value], [prompts],
                   match="--max-model-len")


@FUZZ
@given(flag=st.sampled_from(["--retries", "--num-layers", "--hidden-size"]), value=st.integers(-1000, -1))
def test_sglang_counts_must_be_in_range(tmp_path_factory, flag, value):
    folder = tmp_path_factory.mktemp("s")
    prompts = folder / "p.jsonl"
    prompts.write_text(json.dumps({"input_ids": [1, 2]}) + "\n")
    assert_refused(["capture", "sglang", "--url", "http://127.0.0.1:9", "--prompts", prompts, "--out",
                    folder / "o.h5", flag, str(value)], [prompts], match=flag)


def test_limit_one_captures_one_prompt_and_zero_is_refused(tmp_path):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"input_ids": [1, 2, i]}) + "\n" for i in range(3)))
    line = assert_refused(["capture", "hf", "--model", tmp_path, "--prompts", prompts, "--out", tmp_path / "o.h5",
                           "--limit", "0"], [prompts])
    assert "--limit" in line and invoke(["--help"]).exit_code == 0


@pytest.mark.parametrize("setting", [
    "norm_outlier_sigmas=nan", "norm_outlier_sigmas=-1", "norm_outlier_min_factor=0.5", "norm_outlier_min_factor=inf",
    "degenerate_fail_fraction=1.5", "template_split_min_share=0.7", "template_split_min_share=-0.1",
    "template_split_min_run=0", "template_split_min_run=" + "1" + "0" * 400, "norm_outlier_sigmas=1e999",
])
def test_audit_set_refuses_out_of_range_thresholds(dumps, setting):
    """The audit's thresholds are ranged like compare's (alignprobe/number_ranges.py): a NaN sigma
    flagged nothing, a negative one everything."""
    a, _ = dumps
    assert_refused(["audit", a, "--set", setting], [a])


def test_audit_thresholds_in_range_still_accepted():
    from alignprobe.audit import AuditPolicy
    from alignprobe.findings.tolerances import parse_overrides

    # as --set gives them: text, parsed once by the one --set parser
    p = AuditPolicy().updated(parse_overrides(["norm_outlier_sigmas=0", "norm_outlier_min_factor=1",
                                               "template_split_min_share=0.5", "template_split_min_run=1",
                                               "degenerate_fail_fraction=1"]))
    assert p.norm_outlier_sigmas == 0.0 and p.template_split_min_run == 1
    assert isinstance(p.template_split_min_run, int)  # an int field stays an int
