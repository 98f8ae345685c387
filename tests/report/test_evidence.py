"""A finding's evidence in the HTML report: an explanation's fitted parameters as labelled numbers."""

import re

import numpy as np

from alignprobe.report.evidence import evidence_html

LONG = 0.123456789012345


def explained(params):
    return {"explained": [{"serve_slice": 4, "expected": "HF[4]", "explanation": "channel_scale", "params": params,
                           "held_out_rel_rms": 0.0123456789, "held_out_rows": 64}]}


def test_fitted_parameters_read_as_4_significant_digits():
    page = evidence_html(explained({"factor": LONG, "factors": [LONG, 2.0, np.float32(1.5)]}))
    assert "0.1235" in page and "0.01235" in page
    assert "0.12345" not in page and "{&#x27;" not in page  # no raw repr of the dict
    assert not any(len(d) > 6 for d in re.findall(r"\d+\.(\d+)", page))


def test_a_nested_dict_is_labelled_rows_and_nothing_is_cut():
    factors = [LONG * i for i in range(1, 41)]
    page = evidence_html(explained({"replaces": {"name": "identity", "held_out_rel_rms": LONG}, "factors": factors}))
    nested = page[page.index('<table class="ap-nested">'):]
    assert re.search(r'<th class="l">replaces</th><td class="l"><table class="ap-nested">'
                     r'<tr><th class="l">name</th><td class="l">identity</td></tr>'
                     r'<tr><th class="l">held out rel-RMS</th><td class="l">0.1235</td></tr></table>', nested)
    assert "..." not in page and f"{factors[-1]:.4g}" in page  # the 40th factor, not cut
