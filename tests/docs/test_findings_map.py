"""docs/findings.md's map of each finding code to the module that makes it and the test that pins it
holds: every registered code and judge has a row, each named module makes that code, and each named
test exists and asserts on that code."""

from __future__ import annotations

import ast
import os
import re

from alignprobe.findings.codes import CODES

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HEADING = "## Where each code is decided, and the test that pins it"


def rows() -> list[tuple[str, str, list[str], str]]:
    """(code, judge, modules under alignprobe/, test as path::name) for each row of the map."""
    text = open(os.path.join(ROOT, "docs", "findings.md"), encoding="utf-8").read()
    table = text.split(HEADING, 1)[1].split("\n## ", 1)[0]
    out = []
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[0].startswith("`"):
            continue
        code, judge, modules, test = cells
        out.append((code.strip("`"), judge, re.findall(r"`([\w/]+\.py)`", modules), test.strip("`")))
    return out


def test_every_code_and_judge_has_one_row():
    listed = [(code, judge) for code, judge, _, _ in rows()]
    want = [(c.name, judge) for c in CODES.values() for judge in c.judges]
    assert sorted(listed) == sorted(want)


def test_each_named_module_makes_its_code():
    for code, _, modules, _ in rows():
        assert modules, code
        for module in modules:
            source = open(os.path.join(ROOT, "alignprobe", module), encoding="utf-8").read()
            assert re.search(rf"""["']{code}["']""", source), f"{module} does not name {code}"


def test_each_named_test_exists_and_asserts_on_its_code():
    for code, _, _, test in rows():
        path, name = test.split("::")
        source = open(os.path.join(ROOT, path), encoding="utf-8").read()
        functions = {node.name: node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.FunctionDef)}
        assert name in functions, f"{test}: no such test"
        assert re.search(rf"""["']{code}["']""", _test_text(source, functions[name])), f"{test} does not assert on {code}"


def _test_text(source: str, function: ast.FunctionDef) -> str:
    """The test's own text, and that of the module-level names it uses (a table of the planted faults
    and the code each must give, say)."""
    used = {n.id for n in ast.walk(function) if isinstance(n, ast.Name)}
    tables = [ast.get_source_segment(source, node) or "" for node in ast.parse(source).body
              if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in used for t in node.targets)]
    return "\n".join([ast.get_source_segment(source, function) or "", *tables])
