"""Modules the rest of the package stands on import nothing that imports them back.

A circle (safe_json <-> safe_paths; dump/schema -> the package root -> compare -> dump) works only
while every edge but one is a function-level import, and breaks the day one moves to the top. The
graph here counts function-level imports too, for that reason."""

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "alignprobe"


def _module_path(name: str) -> pathlib.Path:
    parts = name.split(".")[1:]
    folder = PACKAGE.joinpath(*parts)
    return folder / "__init__.py" if folder.is_dir() else folder.with_suffix(".py")


def imports_of(name: str) -> set[str]:
    """The alignprobe modules ``name`` names in an import statement, anywhere in its text."""
    found = set()
    for node in ast.walk(ast.parse(_module_path(name).read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("alignprobe"):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("alignprobe"))
    return {m for m in found if _module_path(m).exists()}


def reaches(start: str, target: str) -> bool:
    seen, todo = set(), [start]
    while todo:
        name = todo.pop()
        for imported in imports_of(name) - seen:
            if imported == target:
                return True
            seen.add(imported)
            todo.append(imported)
    return False


def test_version_module_imports_nothing():
    assert imports_of("alignprobe.version") == set()


@pytest.mark.parametrize("low, high", [("alignprobe.safe_paths", "alignprobe.safe_json"),
                                       ("alignprobe.dump.schema", "alignprobe.compare"),
                                       # a package root gathers its modules; none imports it back
                                       ("alignprobe.audit.run", "alignprobe.audit"),
                                       ("alignprobe.audit.cluster", "alignprobe.audit"),
                                       ("alignprobe.audit.scan", "alignprobe.audit"),
                                       ("alignprobe.audit.reading", "alignprobe.audit"),
                                       ("alignprobe.accept.run", "alignprobe.accept")])
def test_no_circle(low, high):
    assert reaches(high, low), f"{high} no longer uses {low}: this case tests nothing"
    assert not reaches(low, high), f"{low} imports its way back to {high}"


@pytest.mark.parametrize("package", ["audit", "accept"])
def test_the_judges_stand_on_findings_not_on_compares_records(package):
    """Findings, severities, verdicts and policies come from alignprobe.findings; accept may still run a
    comparison (alignprobe.compare), the audit may word a short sample's fix as compare does."""
    records = {"alignprobe.compare.result", "alignprobe.compare.policy", "alignprobe.compare.diagnoses"}
    modules = [".".join(("alignprobe",) + p.relative_to(PACKAGE).with_suffix("").parts).removesuffix(".__init__")
               for p in (PACKAGE / package).rglob("*.py")]
    users = sorted(m for m in modules if imports_of(m) & records)
    assert len(modules) > 5 and not users, f"{', '.join(users)} import compare's findings, severities or policy"
