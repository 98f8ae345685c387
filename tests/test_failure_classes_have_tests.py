"""Each failure class (an explanation, a compare diagnosis, an audit check) and each foreign layout has its
test where a newcomer looks first: tests/X/test_Y.py for alignprobe/X/Y.py. A new failure class or layout
is one new file, and one test file."""

import pathlib

import pytest

from alignprobe.audit.checks import all_checks
from alignprobe.compare.explain import MODULES
from alignprobe.importers.registry import LAYOUTS

ROOT = pathlib.Path(__file__).resolve().parent.parent
DIAGNOSES = sorted(p.stem for p in (ROOT / "alignprobe" / "compare" / "diagnoses").glob("*.py") if p.stem != "__init__")
CHECKS = sorted({type(c).__module__.rsplit(".", 1)[1] for c in all_checks()})
READERS = sorted({type(layout).__module__.rsplit(".", 1)[1] for layout in LAYOUTS})


@pytest.mark.parametrize("module", [f"compare/explain/{m}" for m in MODULES]
                         + [f"compare/diagnoses/{m}" for m in DIAGNOSES] + [f"audit/checks/{m}" for m in CHECKS]
                         + [f"importers/{m}" for m in READERS])
def test_it_has_its_test_file(module):
    folder, name = module.rsplit("/", 1)
    assert (ROOT / "alignprobe" / f"{module}.py").exists(), module
    assert (ROOT / "tests" / folder / f"test_{name}.py").exists(), f"tests/{folder}/test_{name}.py"
