"""The docs hold what the code does: links resolve, the layer-id tables come from conventions.py,
every `alignprobe ...` command names options its subcommand has, and the large-model route runs.

``python tests/docs/test_docs.py`` rewrites the generated block of docs/layer-ids.md from
alignprobe/conventions.py; the test below fails whenever the two differ.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAYER_IDS_DOC = os.path.join(ROOT, "docs", "layer-ids.md")
BEGIN, END = "<!-- generated from alignprobe/conventions.py: begin -->", "<!-- generated: end -->"
EXAMPLE_LAYERS = 61  # DeepSeek-V3, Kimi-K2 / K2.5: the models the serving docs are written for


def markdown_files() -> list[str]:
    """README.md and every page under docs/, as the repository tracks them (or holds them, untracked)."""
    found = [os.path.join(ROOT, "README.md")]
    for folder, _, names in os.walk(os.path.join(ROOT, "docs")):
        found += [os.path.join(folder, n) for n in sorted(names) if n.endswith(".md")]
    return found


# -- the generated conventions block -------------------------------------------------------------

# (system, model_type, ids as configured or None for the system's default, sglang_first_id_rule, case)
EXAMPLES = [
    ("eagle3", "llama", None, True, "EAGLE-3 reference training (its default layers)"),
    ("hf", "llama", (2, 30, 58), True, "`alignprobe capture hf --aux-layers 2,30,58`"),
    ("sglang", "llama", None, True, "SGLang, no ids anywhere (the model's defaults)"),
    ("sglang", "llama", (1, 29, 57), True, "SGLang llama.py, explicit ids"),
    ("sglang", "deepseek_v3", (1, 29, 57), True, "SGLang deepseek_v2.py (DeepSeek-V3, Kimi-K2.x), first id 1"),
    ("sglang", "deepseek_v3", (2, 30, 58), True, "SGLang deepseek_v2.py, first id not 1"),
    ("sglang", "deepseek_v3", (2, 30, 58), False, "SGLang deepseek_v2.py before PR #25454 (`--old-deepseek-rule`)"),
    ("specforge", "deepseek_v3", None, True, "SpecForge (its default ids, captured through SGLang)"),
    ("vllm", "deepseek_v3", (2, 30, 58, 61), True, "vLLM `eagle_aux_hidden_state_layer_ids`"),
    ("speculators", "deepseek_v3", None, True, "speculators (its default ids, through vLLM)"),
    ("lmdeploy", "llama", (1, 29, 57), True, "LMDeploy (Llama targets), any ids in the drafter config"),
    ("llamacpp", "llama", (2, 30, 58), True, "llama.cpp EAGLE-3, the drafter GGUF's `eagle3.target_layers`"),
]
FINAL_FORMS = {"post": "after the final norm", "pre": "before the final norm"}


def conventions_block() -> str:
    """The worked example for N = 61 and the sources, as conventions.map_layer_ids and SOURCES say, then
    each system's own flags (system_flags.SYSTEM_FLAGS), which the fixes render from."""
    from alignprobe.conventions import SOURCES, default_layer_ids, map_layer_ids
    from alignprobe.system_flags import SYSTEM_FLAGS

    n = EXAMPLE_LAYERS
    lines = [
        BEGIN,
        f"Worked example for a model of N = {n} layers (DeepSeek-V3, Kimi-K2 / K2.5). Each row is "
        "`alignprobe.conventions.map_layer_ids` run on that case:",
        "",
        "| case | ids as configured | HF indices captured | HF[N] in its streams | rule applied |",
        "|---|---|---|---|---|",
    ]
    for system, arch, ids, first_id_rule, case in EXAMPLES:
        mapping = map_layer_ids(system, ids, n, arch=arch, sglang_first_id_rule=first_id_rule)
        given = list(ids) if ids is not None else f"{list(default_layer_ids(system, n))} (default)"
        hf = ", ".join(f"HF[{i}]" for i in mapping.hf_indices)
        lines.append(f"| {case} | {given} | {hf} | {FINAL_FORMS[mapping.final_norm]} | {mapping.rule} |")
    lines += ["", "Where each rule was read (`alignprobe.conventions.SOURCES`):", ""]
    lines += [f"- **{name}**: {text}" for name, text in SOURCES.items()]
    lines += ["", "Each system's own words, which the fixes of engine-side findings name for the side's system "
              "(`alignprobe.system_flags.SYSTEM_FLAGS`; a system not listed gets the generic text):", "",
              "| system | picks EAGLE-3 | plain EAGLE | aux layer ids | the final layer | an id k captures |",
              "|---|---|---|---|---|---|"]

    def cell(text: str) -> str:
        return text.replace("|", "\\|") or "-"

    lines += [f"| `{key}` {f.name} | {cell(f.eagle3)} | {cell(f.eagle)} | {cell(f.aux_ids)} | {cell(f.final_layer)} | "
              f"{cell(f.numbering)} |" for key, f in SYSTEM_FLAGS.items()]
    lines += ["", "Where each row was read:", ""]
    lines += [f"- **{key}**: {f.source}" for key, f in SYSTEM_FLAGS.items()]
    lines.append(END)
    return "\n".join(lines)


def generated_part(text: str) -> str:
    start, stop = text.find(BEGIN), text.find(END)
    assert 0 <= start < stop, f"docs/layer-ids.md lacks the markers {BEGIN!r} ... {END!r}"
    return text[start:stop + len(END)]


def write_conventions_block() -> None:
    with open(LAYER_IDS_DOC, encoding="utf-8") as fh:
        text = fh.read()
    with open(LAYER_IDS_DOC, "w", encoding="utf-8") as fh:
        fh.write(text.replace(generated_part(text), conventions_block()))


def test_the_layer_id_example_is_what_conventions_py_computes():
    with open(LAYER_IDS_DOC, encoding="utf-8") as fh:
        text = fh.read()
    assert generated_part(text) == conventions_block(), (
        "docs/layer-ids.md is out of date with alignprobe/conventions.py: run `python tests/docs/test_docs.py`"
    )


def _formula_rows(text: str) -> dict[str, tuple[str, str]]:
    """``| `system` | `2, N//2, N-3` | `HF[2], ...` | ...`` rows of the defaults table."""
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and re.fullmatch(r"`[a-z0-9]+`", cells[0]) and "N" in cells[1]:
            rows[cells[0].strip("`")] = (cells[1].strip("`"), cells[2])
    return rows


def _evaluate(formula: str, n: int) -> tuple[int, ...]:
    terms = re.sub(r"HF\[([^\]]+)\]", r"\1", formula.replace("`", ""))
    assert re.fullmatch(r"[\dN/+\-, ]+", terms), f"not a layer formula: {formula!r}"
    return tuple(int(eval(t, {"__builtins__": {}}, {"N": n})) for t in terms.split(","))  # digits, N, //, +, - only


def test_the_default_id_formulas_match_conventions_py_for_every_depth():
    from alignprobe.conventions import NO_DEFAULT_IDS, SYSTEMS, default_layer_ids, map_layer_ids

    with open(LAYER_IDS_DOC, encoding="utf-8") as fh:
        rows = _formula_rows(fh.read())
    assert set(rows) == set(SYSTEMS) - set(NO_DEFAULT_IDS), f"the defaults table names {sorted(rows)}, conventions.py {sorted(SYSTEMS)}"
    for system, (ids_formula, hf_formula) in rows.items():
        for n in range(8, 129):
            assert _evaluate(ids_formula, n) == default_layer_ids(system, n), (system, n)
            assert _evaluate(hf_formula, n) == map_layer_ids(system, None, n).hf_indices, (system, n)


# -- links ---------------------------------------------------------------------------------------

FENCE = re.compile(r"^```.*?^```", re.S | re.M)
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def heading_anchors(path: str) -> set[str]:
    """GitHub's anchors for a page's headings: lower case, punctuation dropped, spaces to hyphens."""
    with open(path, encoding="utf-8") as fh:
        text = FENCE.sub("", fh.read())
    anchors, seen = set(), {}
    for match in re.finditer(r"^#{1,6}\s+(.+?)\s*#*\s*$", text, re.M):
        slug = re.sub(r"[^\w\- ]", "", match.group(1).strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if not count else f"{slug}-{count}")
    return anchors


def relative_links(path: str) -> list[str]:
    with open(path, encoding="utf-8") as fh:
        text = FENCE.sub("", fh.read())
    text = re.sub(r"`[^`\n]*`", "", text)  # a link written inside inline code is an example, not a link
    return [t for t in LINK.findall(text) if not re.match(r"[a-z][a-z0-9+.-]*:", t)]


@pytest.mark.parametrize("page", markdown_files(), ids=lambda p: os.path.relpath(p, ROOT))
def test_every_relative_link_resolves_inside_the_repository(page):
    broken = []
    for target in relative_links(page):
        file_part, _, anchor = target.partition("#")
        resolved = os.path.normpath(os.path.join(os.path.dirname(page), file_part)) if file_part else page
        if not resolved.startswith(ROOT + os.sep) or not os.path.exists(resolved):
            broken.append(f"{target}: no such file in the repository")
        elif anchor and resolved.endswith(".md") and anchor not in heading_anchors(resolved):
            broken.append(f"{target}: {os.path.relpath(resolved, ROOT)} has no heading #{anchor}")
    assert not broken, broken


def test_the_link_checker_sees_a_broken_link_and_a_broken_anchor(tmp_path, monkeypatch):
    page = tmp_path / "page.md"
    page.write_text("# A title\n[ok](#a-title) [gone](missing.md) [bad](#nope)\n```\n[code](skipped.md)\n```\n")
    assert relative_links(str(page)) == ["#a-title", "missing.md", "#nope"]
    assert heading_anchors(str(page)) == {"a-title"}


def test_no_page_points_outside_the_repository_for_facts():
    # The facts a user needs are in docs/, in the project's own words: no workspace-only files.
    for page in markdown_files():
        with open(page, encoding="utf-8") as fh:
            text = fh.read()
        for name in ("CONVENTIONS.md", "REAL_ENGINES.md", "../shared"):
            assert name not in text, f"{os.path.relpath(page, ROOT)} names {name}"


# -- commands ------------------------------------------------------------------------------------


def documented_commands(path: str) -> list[list[str]]:
    """Every ``alignprobe ...`` line of the page's bash blocks, continuations joined, as argv."""
    with open(path, encoding="utf-8") as fh:
        blocks = re.findall(r"^```(?:bash|sh)\n(.*?)^```", fh.read(), re.S | re.M)
    commands = []
    for block in blocks:
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = line.split(" # ")[0].strip()
            if line.startswith("alignprobe "):
                commands.append(shlex.split(line)[1:])
    return commands


def _unknown_options(argv: list[str]) -> list[str]:
    import click

    from alignprobe.cli.main import cli

    command, rest = cli, list(argv)
    while isinstance(command, click.Group) and rest and not rest[0].startswith("-"):
        command = command.get_command(click.Context(command), rest.pop(0))
        if command is None:
            return [f"no subcommand in {argv[:2]}"]
    if isinstance(command, click.Group):
        return [f"{argv}: names a group, not a command"]
    known = {opt for p in command.params for opt in (*p.opts, *p.secondary_opts)}
    return [t for t in rest if t.startswith("--") and t.split("=")[0] not in known]


@pytest.mark.parametrize("page", markdown_files(), ids=lambda p: os.path.relpath(p, ROOT))
def test_every_documented_command_names_options_its_subcommand_has(page):
    wrong = {" ".join(argv): bad for argv in documented_commands(page) if (bad := _unknown_options(argv))}
    assert not wrong, wrong


def test_the_command_checker_sees_an_option_that_does_not_exist():
    assert _unknown_options(["capture", "sglang", "--url", "u", "--tokens-from", "t.h5", "--out", "s.h5"]) == []
    assert _unknown_options(["capture", "vllm", "--storage-folder", "x"]) == ["--storage-folder"]
    assert _unknown_options(["capture", "nonesuch"]) == ["no subcommand in ['capture', 'nonesuch']"]


def test_the_vllm_server_configs_in_the_docs_are_the_ones_the_capture_builds():
    import json

    from alignprobe.probes.engine_side.alignprobe_vllm_driver import speculative_config, transfer_config

    with open(os.path.join(ROOT, "docs", "serving", "vllm.md"), encoding="utf-8") as fh:
        text = fh.read()
    speculative = [json.loads(m) for m in re.findall(r"--speculative-config '([^']+)'", text)]
    transfer = [json.loads(m) for m in re.findall(r"--kv-transfer-config '([^']+)'", text)]
    assert speculative and transfer
    assert all(c == speculative_config([2, 30, 58, 61]) for c in speculative)
    # the page's GPU server names the stock connector; the capture's own runs name the CPU-safe subclass
    stock = {**transfer_config("/shared/hs"), "kv_connector": "ExampleHiddenStatesConnector"}
    del stock["kv_connector_module_path"]
    assert all(c == stock for c in transfer)


# -- the large-model route (docs/serving.md): a training set as the train side -------------------


@pytest.mark.slow
def test_the_training_set_route_runs_as_written(tmp_path):
    """SpecForge files of a DeepseekV3 as they lie; an SGLang server (EAGLE3, ids 1,2,3) replays their
    tokens with --tokens-from the folder; compare of the folder and the capture passes. A draft config
    one layer deep (3,4,5) fails."""
    import torch

    from fake_sglang import FakeOptions, FakeSGLang

    from alignprobe.demo.tiny_models import synthetic_corpus, tiny_deepseek_v3
    from alignprobe.probes.hf_states import forward_states

    n = 7  # SpecForge's default ids for 7 layers: [1, 2, 3], read by SGLang as HF[2, 3, 4]
    model = tiny_deepseek_v3(num_layers=n, hidden_size=64, seed=5)
    corpus = synthetic_corpus(4, 20, seed=2)
    folder = tmp_path / "specforge_out" / "rows_0-2000"
    folder.mkdir(parents=True)
    for idx, length in enumerate((20, 13, 17, 9)):
        ids = corpus[idx, :length]
        states = forward_states(model, ids[None])
        torch.save({"input_ids": ids, "loss_mask": torch.ones_like(ids),
                    "aux_hidden_state": torch.cat([states.hf[k] for k in (2, 3, 4)], dim=-1),
                    "hidden_state": states.hf[n]}, folder / f"data_{idx}.ckpt")
    (tmp_path / "drafter.json").write_text('{"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 2, 3]}}')

    def alignprobe(*args):
        run = subprocess.run([sys.executable, "-c", "from alignprobe.cli.entry import main; main()", *args], cwd=tmp_path,
                             capture_output=True, text=True, timeout=300)
        return run.returncode, run.stdout + run.stderr

    train = "specforge_out/rows_0-2000/"
    for draft_ids, expected in (([1, 2, 3], 0), ([3, 4, 5], 1)):
        with FakeSGLang(model, tmp_path / f"server{expected}", FakeOptions("EAGLE3", draft_ids)) as server:
            code, out = alignprobe("capture", "sglang", "--url", server.url, "--tokens-from", train,
                                   "--num-layers", str(n), "--out", f"serve{expected}.h5", "--quiet")
            assert code == 0, out
        code, out = alignprobe("compare", "--train-dump", train, "--train-drafter-config", "drafter.json",
                               "--serve-dump", f"serve{expected}.h5")
        assert code == expected, out
    assert "layer_offset" in out


if __name__ == "__main__":
    write_conventions_block()
    print(f"rewrote the generated block of {os.path.relpath(LAYER_IDS_DOC, ROOT)}")
