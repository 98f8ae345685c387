"""vLLM extract_hidden_states connector folders read by import, compare in place and audit.

The files are written as vLLM's ExampleHiddenStatesConnector writes them (example_hidden_states_connector.py,
extract_hidden_states.py): ``{dir}/{req_id}.safetensors`` with ``hidden_states [S, L, H]`` (the ids in
layer order, id k = HF[k], id N the last layer's output before the final norm) and ``token_ids [S]``,
plus the ``.lock`` it leaves behind once the write is done.
"""

from __future__ import annotations

import fcntl
import os

import pytest
import torch
from safetensors.torch import save_file

from alignprobe.audit import audit
from alignprobe.compare import compare
from alignprobe.errors import BadInput
from alignprobe.importers import detect_format, import_source, open_source
from bad_input_helpers import assert_refused, invoke
from tests.helpers.foreign_writers import N, capture_serve, hf_states, model_and_prompts

IDS = [2, 4, 5]  # vLLM numbering: HF[2, 4, 5], what capture hf's eagle3 view holds for N=8


def prenorm_final(tokens) -> torch.Tensor:
    """The last decoder layer's output before the final norm (vLLM's id N), [S, H]."""
    model, _ = model_and_prompts()
    from alignprobe.probes.hf_states import forward_states

    with torch.no_grad():
        return forward_states(model, torch.tensor([tokens])).final_prenorm[0]


def write_connector_dir(root, ids=IDS, dtype=torch.float32) -> str:
    """What the connector leaves for the prompts, in request order (not the prompts' order)."""
    _, prompts = model_and_prompts()
    os.makedirs(root, exist_ok=True)
    for i, p in enumerate(reversed(prompts)):
        hs = hf_states(p.token_ids)
        slices = [prenorm_final(p.token_ids) if k == N else hs[k][0] for k in sorted(set(ids))]
        path = os.path.join(root, f"cmpl-{i:04x}-0.safetensors")
        save_file({"hidden_states": torch.stack(slices, dim=1).to(dtype).contiguous(),
                   "token_ids": torch.tensor(p.token_ids, dtype=torch.long)}, path)
        open(path + ".lock", "w").close()  # released: the write is done
    return str(root)


@pytest.fixture(scope="module")
def serve(tmp_path_factory):
    return capture_serve(tmp_path_factory.mktemp("serve"))


def test_a_connector_folder_compares_in_place_on_either_side(tmp_path, serve):
    folder = write_connector_dir(tmp_path / "vllm")
    assert detect_format(folder) == "vllm"
    with open_source(folder, in_place=True, layer_ids=IDS, num_layers=N) as src:
        assert src.num_samples == 6 and src.streams["aux"].hf_indices == (2, 4, 5) and "final" not in src.streams
        assert src.plan.layout.row_reader  # rows read through safetensors' slices, not the file decoded whole
    for result in (compare(folder, serve, train_import={"layer_ids": IDS}),
                   compare(serve, folder, serve_import={"layer_ids": IDS})):
        assert result.verdict == "PASS", [(f.code, f.title) for f in result.findings]


def test_ids_in_layer_order_and_id_n_kept_apart_as_the_prenorm_final(tmp_path, serve):
    folder = write_connector_dir(tmp_path / "vllm", ids=[2, 4, 5, N])
    with open_source(folder, in_place=True, layer_ids=[N, 5, 2, 4], num_layers=N) as src:
        assert src.plan.layer_ids == (2, 4, 5, N) and any("layer order" in n for n in src.plan.notes)
        assert src.streams["aux"].hf_indices == (2, 4, 5)
        assert (src.streams["final"].hf_indices, src.streams["final"].final_norm) == ((N,), "pre")
    result = compare(serve, folder, serve_import={"layer_ids": [2, 4, 5, N]})
    assert "layer_offset" not in {f.code for f in result.findings}


def test_import_and_audit_read_each_file(tmp_path):
    folder = write_connector_dir(tmp_path / "vllm", dtype=torch.bfloat16)
    result = import_source(folder, tmp_path / "v.h5", layer_ids=IDS, num_layers=N, progress=False)
    assert result.samples == 6 and result.plan.format == "vllm"
    report = audit([folder])
    assert report.sources[0].format == "vllm"
    assert not [f for f in report.findings if f.code == "unreadable"], report.findings


def test_ids_one_off_are_named(tmp_path, serve):
    # SpecForge's numbering given for vLLM's files: the claims say HF[1, 3, 4], the states are HF[2, 4, 5]
    folder = write_connector_dir(tmp_path / "vllm")
    result = compare(serve, folder, serve_import={"layer_ids": [1, 3, 4]})
    assert "claim_mismatch" in result.codes(), result.codes()


def test_the_ids_are_never_assumed(tmp_path):
    folder = write_connector_dir(tmp_path / "vllm")
    with pytest.raises(BadInput, match="--layer-ids"):
        open_source(folder, in_place=True, num_layers=N)
    assert_refused(["import", folder, "--num-layers", "8", "--out", tmp_path / "o.h5", "--quiet"], [folder],
                   match="--layer-ids")
    serve = str(tmp_path / "serve.h5")
    capture_serve(tmp_path)
    assert_refused(["compare", "--train-dump", serve, "--serve-dump", folder], [folder, serve], match="--layer-ids")
    ok = invoke(["compare", "--train-dump", serve, "--serve-dump", folder, "--serve-layer-ids", "2,4,5", "--quiet"])
    assert ok.exit_code == 0, ok.output
    ok = invoke(["compare", "--train-dump", folder, "--train-layer-ids", "2,4,5", "--serve-dump", serve, "--quiet"])
    assert ok.exit_code == 0, ok.output
    told = ["import", folder, "--layer-ids", "2,4,5", "--num-layers", "8", "--quiet", "--system"]
    assert invoke(told + ["vllm", "--out", tmp_path / "v.h5"]).exit_code == 0
    assert_refused(told + ["speculators", "--out", tmp_path / "s.h5"], [folder], match="vllm files, not speculators")


def test_a_file_still_being_written_is_refused(tmp_path):
    folder = write_connector_dir(tmp_path / "vllm")
    lock = sorted(p for p in os.listdir(folder) if p.endswith(".lock"))[2]
    with open(os.path.join(folder, lock)) as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # as the connector holds it while writing
        assert_refused(["import", folder, "--num-layers", "8", "--layer-ids", "2,4,5", "--out", tmp_path / "o.h5",
                        "--quiet"], [folder], match="vLLM is still writing it")
        invoke(["audit", folder, "--json", tmp_path / "a.json", "--no-progress"])  # names the file and goes on
        assert "still writing" in (tmp_path / "a.json").read_text()
    assert not os.path.exists(tmp_path / "o.h5")


def test_rows_of_a_prefix_cache_hit_are_refused_with_the_capture_that_keeps_them(tmp_path):
    folder = tmp_path / "short"
    folder.mkdir()
    save_file({"hidden_states": torch.randn(3, 3, 32), "token_ids": torch.arange(1, 6)}, str(folder / "r.safetensors"))
    assert_refused(["import", folder, "--num-layers", "8", "--layer-ids", "2,4,5", "--out", tmp_path / "o.h5",
                    "--quiet"], [folder], match="capture vllm --from-dir")


def test_a_speculators_folder_stays_speculators(tmp_path):
    folder = tmp_path / "hs"
    folder.mkdir()
    save_file({"hidden_states": torch.randn(4, 4, 32), "token_ids": torch.arange(1, 5)}, str(folder / "hs_0.safetensors"))
    save_file({"hidden_states": torch.randn(4, 4, 32), "token_ids": torch.arange(1, 5)}, str(folder / "req.safetensors"))
    assert detect_format(str(folder)) == "speculators"
    assert detect_format(str(folder / "hs_0.safetensors")) == "speculators"
    assert detect_format(str(folder / "req.safetensors")) == "vllm"
