"""The report's first screen: the fix of each error and warning right under the verdict."""

import numpy as np

from alignprobe.compare import compare
from alignprobe.dump import StreamClaim
from alignprobe.findings import render
from alignprobe.report.html import fixes_html, render_html
from compare_helpers import H, N, make_samples, write_dump, write_train


def drifted(tmp_path):
    samples = make_samples(num=3, length=20)
    train = write_train(tmp_path / "t.h5", samples)
    claim = StreamClaim(range(N + 1), H, N, "float32", "post", "layers")
    g = np.random.default_rng(0)

    def states(hf, pre, sid):
        x = hf.copy()
        x[:, 3] += 0.5 * g.standard_normal(x[:, 3].shape).astype(np.float32)
        return {"layers": x.reshape(len(x), -1)}

    return compare(train, write_dump(tmp_path / "s.h5", samples, {"layers": claim}, states), {"mapping_min_cosine": 0.5})


def test_the_fixes_come_between_the_verdict_and_the_findings(tmp_path):
    result = drifted(tmp_path)
    page = render_html(result)
    fixed = [f for f in result.findings if f.severity in ("error", "warn") and render.fix(f)]
    assert fixed
    todo = page.index('data-section="fixes"')
    assert page.index('class="ap-verdict') < todo < page.index("<h2>Findings</h2>")
    for f in fixed:
        assert f.code in page[todo:page.index("<h2>Findings</h2>")]


def test_info_findings_alone_give_no_fix_box(tmp_path):
    result = drifted(tmp_path)
    result.findings = [f for f in result.findings if f.severity == "info"]
    assert fixes_html(result) == ""


def test_a_sentence_under_two_evidence_keys_is_shown_once():
    from alignprobe.report.evidence import evidence_html

    text = "SGLang adds +1 to explicitly configured layer ids"
    page = evidence_html({"conventions": text, "convention": text, "shift": 1, "basis": "measured"})
    assert page.count(text) == 1 and "shift" in page and "measured" in page
