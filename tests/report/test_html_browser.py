"""The HTML report in a real headless Chromium: it loads offline, shows the verdict, its images render.

Skips without Chromium, unless ALIGNPROBE_REQUIRE_BROWSER=1 (CI), where a missing browser fails.
"""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
from PIL import Image

from alignprobe.report import write_report
from demo_run import demo_run
from headless_browser import chromium_or_skip, view_page
from report_samples import offset_result, width_result

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # two Chromium starts a page, ~3 s each

FAIL_RED = (0xB3, 0x26, 0x1E)  # .ap-FAIL in alignprobe/report/html.py


@pytest.fixture(scope="module")
def chromium():
    return chromium_or_skip()


@pytest.mark.parametrize("make, images", [(offset_result, 3), (width_result, 2)], ids=["offset", "width"])
def test_report_renders_in_chromium(chromium, tmp_path, make, images):
    files = write_report(make(), tmp_path / "report")
    page = view_page(chromium, files.html, str(tmp_path))

    assert page.title.startswith("alignprobe FAIL")
    assert page.verdict == "FAIL" and page.verdict_text.startswith("FAIL")
    assert page.verdict_visible and page.verdict_top < 100  # the first thing on the page
    assert len(page.images) == images
    for img in page.images:
        assert img["complete"] and img["width"] > 100 and img["height"] > 100, img

    # The screenshot shows the red FAIL banner at the top.
    top = np.asarray(Image.open(page.screenshot).convert("RGB"), dtype=int)[:120]
    red = int((np.abs(top - np.array(FAIL_RED)).max(axis=2) < 12).sum())
    assert red > 0.2 * top.shape[1] * 40, red


def test_probe_sees_a_broken_image(chromium, tmp_path):
    """The check itself can fail: an image that does not decode has no natural size."""
    page_path = tmp_path / "broken.html"
    page_path.write_text(
        '<!DOCTYPE html><html><head><title>t</title></head><body><div data-verdict="PASS">PASS</div>'
        '<img alt="broken" src="data:image/png;base64,AAAA">'
        '<img alt="remote" src="https://example.com/plot.png"></body></html>'
    )
    page = view_page(chromium, str(page_path), str(tmp_path))
    assert page.verdict == "PASS"
    assert [img["width"] for img in page.images] == [0, 0]  # remote: name resolution is mapped away


@pytest.mark.parametrize("scenario, verdict, images", [("clean", "PASS", 4), ("offset_plus1", "FAIL", 4)])
def test_demo_report_renders_in_chromium(chromium, tmp_path, scenario, verdict, images):
    """A real report (the demo's): similarity, per-layer, position and per-token plots all decode."""
    run = demo_run()
    assert run.returncode == 0, run.stderr
    page = view_page(chromium, os.path.join(run.out_dir, scenario, "report.html"), str(tmp_path))
    assert page.verdict == verdict and page.verdict_visible and page.verdict_top < 100
    assert len(page.images) == images
    assert all(img["complete"] and img["width"] > 100 and img["height"] > 100 for img in page.images), page.images


# Which metric plot (by its caption) must draw which of the policy's lines: (metric, level, policy key).
METRIC_PLOTS = {
    "per-token cosine percentiles, relative RMS error and norm ratio": [
        ("cosine_p1", "warn", "drift_warn_cosine_p1"), ("cosine_p1", "fail", "drift_fail_cosine_p1"),
        ("rel_rms", "warn", "drift_warn_rel_rms"), ("rel_rms", "fail", "drift_fail_rel_rms")],
    "relative RMS error by token position": [
        ("rel_rms", "warn", "drift_warn_rel_rms"), ("rel_rms", "fail", "drift_fail_rel_rms")],
    "distribution of the per-token cosine": [
        ("cosine_p1", "warn", "drift_warn_cosine_p1"), ("cosine_p1", "fail", "drift_fail_cosine_p1")],
    "mean cosine of every train HF index": [("mapping_cosine", "fail", "mapping_min_cosine")],
}


@pytest.mark.parametrize("scenario, verdict, plots", [
    ("clean", "PASS", 4), ("eagle_not_eagle3", "FAIL", 1), ("offset_plus1", "FAIL", 4), ("int4", "FAIL", 4),
], ids=["clean-pass", "width", "offset", "drift"])
def test_every_metric_plot_carries_its_tolerance_lines(chromium, tmp_path, scenario, verdict, plots):
    """The four demo reports, as a browser shows them: each metric plot names the warn and fail lines it
    drew (data-tolerances, written from the lines plots.py drew), at the policy's values; every image
    decodes and spans the page width. ALIGNPROBE_SCREENSHOTS=DIR keeps a full-page screenshot of each."""
    run = demo_run()
    assert run.returncode == 0, run.stderr
    report = os.path.join(run.out_dir, scenario)
    with open(os.path.join(report, "result.json")) as fh:
        policy = json.load(fh)["policy"]
    page = view_page(chromium, os.path.join(report, "report.html"), str(tmp_path), window="1280,5200")
    assert page.verdict == verdict and page.title.startswith(f"alignprobe {verdict}: train ")
    assert page.images and all(img["complete"] and img["width"] > 100 and img["height"] > 100 for img in page.images)
    checked = 0
    for img in page.images:
        kind = next((k for k in METRIC_PLOTS if k in img["alt"]), None)
        if kind is None:
            assert img["tolerances"] is None, img["alt"]  # the slice layout: no metric, no lines
            continue
        drawn = {(t["metric"], t["level"]): t["value"] for t in json.loads(img["tolerances"])}
        for metric, level, key in METRIC_PLOTS[kind]:
            assert drawn.get((metric, level)) == pytest.approx(policy[key]), (img["alt"], metric, level)
        checked += 1
    assert checked == plots
    # page-wide, not thumbnails: each image fills the body's width less its padding (24 px a side)
    assert all(img["shown_width"] >= 0.95 * (img["page_width"] - 48) for img in page.images), page.images
    keep = os.environ.get("ALIGNPROBE_SCREENSHOTS")
    if keep:
        os.makedirs(keep, exist_ok=True)
        shutil.copy(page.screenshot, os.path.join(keep, f"{scenario}.png"))
