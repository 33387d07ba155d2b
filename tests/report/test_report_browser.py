"""The report in a real browser: Debian's Chromium, headless.

Skipped when ``/usr/bin/chromium`` is missing, except under CI (``CI=true``),
where the browser must be there and the tests must run.
"""

from __future__ import annotations

import os
import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from rackwise.report.plots import colour

CHROMIUM = Path("/usr/bin/chromium")
# Without the background-networking flags Chromium tries to reach Google
# and, on a closed network, logs errors that have nothing to do with the page.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--enable-logging=stderr", "--v=0")
# A console message is logged as "[pid:tid:date:LEVEL:CONSOLE(line)] ..." or
# "...:LEVEL:CONSOLE:line] ..." depending on the version; any level counts.
CONSOLE = re.compile(r":(?:INFO|WARNING|ERROR|VERBOSE\d*):CONSOLE|Uncaught|Refused to")


@pytest.fixture(scope="module")
def chromium() -> Path:
    if not CHROMIUM.is_file():
        reason = f"{CHROMIUM} is missing (apt-get install chromium)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI must run the browser tests: {reason}")
        pytest.skip(reason)
    return CHROMIUM


def _run(browser: Path, page: Path, profile: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    profile.mkdir()
    return subprocess.run(
        [str(browser), *FLAGS, f"--user-data-dir={profile}", *extra, page.resolve().as_uri()],
        capture_output=True, text=True, timeout=180, check=True)


def _console_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if CONSOLE.search(line)]


class _Elements(HTMLParser):
    """Counts the tags of a dumped DOM and keeps the attributes of its images."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: dict[str, int] = {}
        self.images: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] = self.tags.get(tag, 0) + 1
        if tag == "img":
            self.images.append(dict(attrs))


def test_console_check_catches_a_broken_page(chromium: Path, tmp_path: Path) -> None:
    # The check below is only worth something if it sees errors when there are some.
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><title>x</title><script>missingFunction();</script>")
    result = _run(chromium, page, tmp_path / "profile", "--dump-dom")
    assert any("missingFunction" in line for line in _console_lines(result.stderr))


def test_report_loads_without_console_messages(chromium: Path, compare_report: Path,
                                               tmp_path: Path) -> None:
    result = _run(chromium, compare_report, tmp_path / "profile", "--dump-dom")
    assert _console_lines(result.stderr) == []
    dom = _Elements()
    dom.feed(result.stdout)
    assert dom.tags.get("h1") == 1
    assert dom.tags.get("h2", 0) >= 9  # contents, 2 tables, 5 figures, configuration
    assert dom.tags.get("figure") == 5 and dom.tags.get("table") == 3
    assert len(dom.images) == 5
    for image in dom.images:
        assert (image.get("src") or "").startswith("data:image/png;base64,")
        assert len(image.get("alt") or "") > 40


def test_screenshot_shows_the_plots(chromium: Path, compare_report: Path, tmp_path: Path) -> None:
    from matplotlib import image

    shot = tmp_path / "report.png"
    result = _run(chromium, compare_report, tmp_path / "profile",
                  f"--screenshot={shot}", "--window-size=1280,2000")
    assert _console_lines(result.stderr) == []
    pixels = (image.imread(shot)[:, :, :3] * 255).round().astype(int)
    assert pixels.shape[:2] == (2000, 1280)
    # The first two groups' line colours: drawn only if the embedded images decoded.
    for index in (0, 1):
        rgb = np.array([int(colour(index)[i:i + 2], 16) for i in (1, 3, 5)])
        near = np.all(np.abs(pixels - rgb) <= 40, axis=2)
        assert near.sum() > 300, f"too few pixels of {colour(index)} in the screenshot"


# Marks every element wider than its box; the report itself runs no script, so the
# probe goes into a copy without the Content-Security-Policy that forbids scripts.
_PROBE = """<script>window.addEventListener('load', () => {
  const wide = [...document.querySelectorAll('main, main *')]
    .filter(e => e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflowX !== 'visible')
    .map(e => e.tagName + '.' + e.className);
  document.body.setAttribute('data-wide', wide.join(' ') || 'none');
  document.body.setAttribute('data-page', document.documentElement.scrollWidth);
});</script>"""


def test_a_sweep_report_fits_1400_px_without_sideways_scrolling(chromium: Path, tmp_path: Path) -> None:
    from tests.experiments.conftest import EXPERIMENTS

    from rackwise.experiments import load_experiment, plan, run_cells
    from rackwise.report.build import build_report

    smoke = EXPERIMENTS / "smoke.yaml"
    run_cells(plan(load_experiment(smoke), str(smoke)), tmp_path / "sweep", jobs=1)
    report = build_report(tmp_path / "sweep", tmp_path / "report.html")
    text = report.read_text()
    assert "Verdict" in text and "tiresias-packed (load=2.0, workload=itp)" in text
    probed = tmp_path / "probed.html"
    probed.write_text(re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", text)
                      .replace("</body>", _PROBE + "</body>"))
    result = _run(chromium, probed, tmp_path / "profile", "--window-size=1400,1000",
                  "--virtual-time-budget=5000", "--dump-dom")
    assert 'data-wide="none"' in result.stdout
    assert 'data-page="1400"' in result.stdout
    shot = tmp_path / "report-1400.png"  # kept with the test's files, to look at
    _run(chromium, report, tmp_path / "profile-shot", f"--screenshot={shot}", "--window-size=1400,1400")
    assert shot.stat().st_size > 10_000


def test_the_width_probe_sees_a_table_wider_than_its_box(chromium: Path, tmp_path: Path) -> None:
    page = tmp_path / "wide.html"
    page.write_text("<!DOCTYPE html><title>x</title><body><main><div class='table-wrap' "
                    "style='overflow-x:auto;width:300px'><table><tr><td style='white-space:nowrap'>"
                    + "wide " * 200 + "</td></tr></table></div></main>" + _PROBE + "</body>")
    result = _run(chromium, page, tmp_path / "profile", "--window-size=1400,1000",
                  "--virtual-time-budget=5000", "--dump-dom")
    assert 'data-wide="DIV.table-wrap"' in result.stdout
