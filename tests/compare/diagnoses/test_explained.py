"""compare/diagnoses/explained.py: the finding each explanation names, one a code and stream."""


def test_one_cause_found_two_ways_on_one_stream_is_one_finding():
    from alignprobe.compare.diagnoses.explained import explanation_findings
    from alignprobe.compare.explain.displaced_rows import DISPLACED_FIX
    from alignprobe.findings import render
    from alignprobe.compare.policy import Policy
    from alignprobe.compare.result import ExplanationFit, SliceExplanation

    def fit(name, params):
        return ExplanationFit(name, 4, True, 0.01, 0.99, 0.01, 100, params, f"{name} fits")

    explained = [SliceExplanation("hidden_states", 0, "HF[2]", fit("displaced_rows", {"code": "foreign_rows"})),
                 SliceExplanation("hidden_states", 1, "HF[4]", fit("foreign_rows", {})),
                 SliceExplanation("hidden_states", 2, "HF[5]", fit("foreign_rows", {}))]
    found = explanation_findings("hidden_states", "drafter_input", explained, [2, 4, 5], 8, Policy(), {}, {}, True)
    assert [f.code for f in found] == ["foreign_rows"]
    assert [e["serve_slice"] for e in found[0].evidence["explained"]] == [0, 1, 2]
    assert render.fix(found[0]).endswith(DISPLACED_FIX)
