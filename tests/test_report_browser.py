"""The HTML report in a real headless Chromium: it loads offline, shows the verdict, its images render.

Skips without Chromium, unless ALIGNPROBE_REQUIRE_BROWSER=1 (CI), where a missing browser fails.
"""

from __future__ import annotations

import os

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
