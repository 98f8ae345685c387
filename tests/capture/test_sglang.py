"""capture_sglang's choice of source, checked before any server is asked or engine started (one line each).

The captures themselves run against the loopback server (tests/probes/test_sglang_http.py) and the
real engines (tests/engines/test_sglang.py, test_gate_sglang.py)."""

import pytest

from alignprobe.capture import capture_sglang
from alignprobe.errors import BadInput


@pytest.fixture
def prompts(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"input_ids": [1, 2, 3]}\n')
    return str(path)


@pytest.mark.parametrize("sources", [{}, {"url": "http://127.0.0.1:9", "engine_model": "m"}])
def test_exactly_one_source(tmp_path, prompts, sources):
    with pytest.raises(BadInput, match="exactly one of --url .* or --engine-model"):
        capture_sglang(tmp_path / "s.h5", prompts_path=prompts, **sources)


@pytest.mark.parametrize("given", ["neither", "both"])
def test_exactly_one_prompt_source(tmp_path, prompts, given):
    extra = {} if given == "neither" else {"prompts_path": prompts, "tokens_from": prompts}
    with pytest.raises(BadInput, match="exactly one of --tokens-from DUMP or --prompts JSONL"):
        capture_sglang(tmp_path / "s.h5", url="http://127.0.0.1:9", **extra)


@pytest.mark.parametrize("engine", [{"engine_python": "/usr/bin/python3"}, {"engine_options": {"device": "cpu"}}])
def test_engine_settings_go_with_the_offline_engine_only(tmp_path, prompts, engine):
    with pytest.raises(BadInput, match="go with --engine-model, not --url"):
        capture_sglang(tmp_path / "s.h5", url="http://127.0.0.1:9", prompts_path=prompts, **engine)
    assert not (tmp_path / "s.h5").exists()


def test_the_out_file_is_never_an_input(prompts):
    with pytest.raises(BadInput, match="--out"):
        capture_sglang(prompts, url="http://127.0.0.1:9", prompts_path=prompts)
