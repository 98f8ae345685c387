"""Open an HTML file in a real headless Chromium and report what the page shows.

The page is copied next to a probe script that runs on ``load`` and writes what a reader would see
(the verdict element's text and size, every image's decoded size) into the DOM as JSON; Chromium's
``--dump-dom`` then hands the DOM back. Name resolution is mapped to nothing, so a page that needs
the network shows broken images here.
"""

from __future__ import annotations

import dataclasses
import html as html_lib
import json
import os
import re
import shutil
import subprocess

import pytest

REQUIRE_ENV = "ALIGNPROBE_REQUIRE_BROWSER"
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
PROBE_ID = "alignprobe-browser-probe"

# Runs once the page (and its data-URI images) finished loading; the verdict element is the one
# the report marks with data-verdict.
PROBE_SCRIPT = """
<script>
window.addEventListener("load", () => {
  const verdict = document.querySelector("[data-verdict]");
  const box = verdict ? verdict.getBoundingClientRect() : null;
  const style = verdict ? getComputedStyle(verdict) : null;
  const out = {
    title: document.title,
    verdict: verdict ? verdict.getAttribute("data-verdict") : null,
    verdict_text: verdict ? verdict.innerText.trim() : null,
    verdict_visible: !!box && box.width > 0 && box.height > 0 && style.visibility !== "hidden" && style.display !== "none",
    verdict_top: box ? box.top : null,
    images: Array.from(document.images).map(img => ({
      alt: img.alt, complete: img.complete, width: img.naturalWidth, height: img.naturalHeight,
      shown_width: img.getBoundingClientRect().width, tolerances: img.getAttribute("data-tolerances"),
      page_width: document.body.clientWidth,
    })),
  };
  const pre = document.createElement("pre");
  pre.id = "%s";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>
""" % PROBE_ID


@dataclasses.dataclass
class PageView:
    """What Chromium showed: the probe's findings and a screenshot."""

    title: str
    verdict: str | None
    verdict_text: str | None
    verdict_visible: bool
    verdict_top: float | None
    images: list[dict]
    screenshot: str


def chromium_or_skip() -> str:
    """The Chromium executable; skips the test when there is none, fails instead where CI requires one."""
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    message = "headless Chromium not found (Debian: apt-get install chromium)"
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{message}, and {REQUIRE_ENV}=1 requires the browser test to run")
    pytest.skip(message)


def _chromium(executable: str, profile_dir: str, *args: str, timeout: float = 60) -> str:
    command = [
        executable,
        "--headless",
        "--no-sandbox",  # CI runs as root, where Chromium's sandbox refuses to start
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        f"--user-data-dir={profile_dir}",
        "--host-resolver-rules=MAP * ~NOTFOUND",  # the page must not need the network
        "--virtual-time-budget=5000",
        *args,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise AssertionError(f"chromium exited {done.returncode}: {done.stderr[-2000:]}")
    return done.stdout


def view_page(executable: str, html_path: str, work_dir: str, window: str = "1280,1600") -> PageView:
    """Load ``html_path`` (a copy with the probe script added) and screenshot it (``window``: width,height)."""
    with open(html_path, encoding="utf-8") as f:
        html = f.read()
    if "</body>" not in html:
        raise AssertionError(f"{html_path} has no </body>")
    probed = os.path.join(work_dir, "probed.html")
    with open(probed, "w", encoding="utf-8") as f:
        f.write(html.replace("</body>", PROBE_SCRIPT + "</body>", 1))
    url = "file://" + os.path.abspath(probed)

    dom = _chromium(executable, os.path.join(work_dir, "profile-dom"), "--dump-dom", url)
    match = re.search(rf'<pre id="{PROBE_ID}">(.*?)</pre>', dom, re.S)
    if not match:
        raise AssertionError("the probe script did not run: the page did not finish loading")
    found = json.loads(html_lib.unescape(match.group(1)))

    screenshot = os.path.join(work_dir, "page.png")
    _chromium(executable, os.path.join(work_dir, "profile-shot"), f"--screenshot={screenshot}", f"--window-size={window}", url)
    return PageView(screenshot=screenshot, **found)
