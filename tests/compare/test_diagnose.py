"""compare's failure classes as data: every code compare raises is made in a module of its own class
(compare/diagnoses/, compare/explain/), every explanation names its own registered code and fix, and no
module reads or edits a finding's text after it is made."""

import pathlib
import re

from alignprobe.compare.explain import EXPLANATIONS, MODULES
from alignprobe.compare.explain.base import Explanation
from alignprobe.findings import codes_of

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "alignprobe" / "compare"
CLASSES = sorted((PACKAGE / "diagnoses").glob("*.py")) + sorted((PACKAGE / "explain").glob("*.py"))


def test_every_compare_code_is_made_by_a_failure_class_module():
    sources = {p: p.read_text() for p in CLASSES}
    for code in codes_of("compare"):
        makers = [p.name for p, text in sources.items()
                  if re.search(rf'(make\(|_drift\(|code = |Named\()\s*"{code}"', text)]
        assert makers, f"no module of compare/diagnoses or compare/explain makes {code}"
    # the orchestrator only gathers and settles them
    assert not re.search(r"\bmake\(|Finding\(", (PACKAGE / "diagnose.py").read_text())


def test_every_explanation_names_a_registered_code_and_its_fix_in_its_module():
    assert [e.name for e in EXPLANATIONS] == list(dict.fromkeys(e.name for e in EXPLANATIONS))  # one each
    assert len(EXPLANATIONS) == len(MODULES)
    for e in EXPLANATIONS:
        assert Explanation in type(e).__mro__ and type(e).__module__.endswith(tuple(MODULES)), e.name
        if e.code is not None:
            assert e.code in codes_of("compare") and e.fix, e.name
        for other in e.narrower_than:
            assert other in {x.name for x in EXPLANATIONS}, (e.name, other)


def test_no_failure_class_reads_or_edits_a_findings_text():
    edits = re.compile(r"\.(title|fix)\s*(\+=|=[^=])|in [a-z_]+\.(title|fix)\b|\.(title|fix)\.(find|startswith|endswith)")
    for path in CLASSES + [PACKAGE / "diagnose.py"]:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            assert not edits.search(line), f"{path.name}:{number}: {line.strip()}"
