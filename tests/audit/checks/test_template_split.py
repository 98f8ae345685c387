"""audit/checks/template_split.py: a marker (tokens that always come together) in only part of the set,
neither a handful nor nearly all: named with the smaller side, the same on any number of units."""

import numpy as np

from alignprobe.audit.checks.template_split import TemplateSplit
from audit_checks import TOKENS, audited, sample

MARKER = [90001, 90002]  # a <think> ... </think> pair, say


def samples_with_marker(marked: int, total: int = 20):
    out = []
    for i in range(total):
        ids = np.arange(1, TOKENS + 1) + 1000 * i
        if i < marked:
            ids[[3, 7]] = MARKER
        out.append(sample(f"data_{i:02d}.ckpt", seed=i, token_ids=ids))
    return out


def test_a_marker_in_part_of_the_set_names_the_smaller_side_on_any_number_of_units():
    found = audited(TemplateSplit(), samples_with_marker(9))
    assert [f.code for f in found] == ["template_split"] and found[0].severity == "warn"
    assert found[0].evidence["tokens"] == MARKER and found[0].evidence["samples_with"] == 9
    assert found == audited(TemplateSplit(), samples_with_marker(9), units=5)


def test_a_marker_in_a_handful_of_samples_or_in_all_is_no_split():
    assert audited(TemplateSplit(), samples_with_marker(3)) == []
    assert audited(TemplateSplit(), samples_with_marker(20)) == []
