"""The audit and accept packages' roots only gather what their modules define: no module inside
either imports its package root back (the root imports run.py, which imports the scan, the reading,
the cluster: a module that imports the root from there closes a circle that holds only while one of
its edges stays inside a function). Function-level imports are counted for that reason."""

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "alignprobe"


def imported_names(path: pathlib.Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


@pytest.mark.parametrize("package", ["audit", "accept"])
def test_no_module_imports_its_package_root(package):
    root = f"alignprobe.{package}"
    modules = [p for p in (PACKAGE / package).rglob("*.py") if p != PACKAGE / package / "__init__.py"]
    assert len(modules) > 5
    back = sorted(str(p.relative_to(PACKAGE)) for p in modules if root in imported_names(p))
    assert not back, f"{', '.join(back)} import {root} (its package root) back"


@pytest.mark.parametrize("package", ["audit", "accept"])
def test_the_judges_import_nothing_of_compare_for_findings(package):
    """Findings, severities, verdicts and policies come from alignprobe.findings, not compare's records."""
    shared = {"alignprobe.compare.result", "alignprobe.compare.policy", "alignprobe.compare.diagnoses"}
    users = sorted(str(p.relative_to(PACKAGE)) for p in (PACKAGE / package).rglob("*.py")
                   if imported_names(p) & shared)
    assert not users, f"{', '.join(users)} import compare's findings, severities or policy"
