"""The committed demo report in a real browser: nothing cut off at 1280 px, the Answer above the fold, every plot
loaded.

Optional: needs the `browser` extra (`pip install -e ".[browser]"`: playwright) and a Chromium (Debian's
`apt-get install chromium`, or the executable in `RLAB_CHROMIUM`); playwright drives that browser, it downloads
none. Without either the test skips and says which is missing (`pytest -ra`).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "results" / "demo" / "comparison.html"


def _chromium() -> str:
    found = os.environ.get("RLAB_CHROMIUM") or next(
        (p for name in ("chromium", "chromium-browser", "google-chrome") if (p := shutil.which(name))), None
    )
    if not found:
        pytest.skip("no Chromium: apt-get install chromium, or set RLAB_CHROMIUM to its executable")
    return found


@pytest.fixture(scope="module")
def page():
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright missing: pip install -e '.[browser]'"
    )
    executable = _chromium()
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        tab = browser.new_page(viewport={"width": 1280, "height": 800})
        tab.goto(PAGE.as_uri())
        tab.wait_for_load_state("load")
        yield tab
        browser.close()


def test_nothing_is_cut_off_at_1280_px(page):
    overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0  # wide tables scroll inside their own box, the page never does
    boxes = page.evaluate(
        "[...document.querySelectorAll('.scroll')].filter(b => b.getBoundingClientRect().right > innerWidth + 1)"
        ".length"
    )
    assert boxes == 0


def test_the_answer_table_is_above_the_fold(page):
    box = page.evaluate(
        "(() => { const r = document.querySelector('.answer table').getBoundingClientRect();"
        " return [r.top, r.bottom, r.right]; })()"
    )
    top, bottom, right = box
    assert 0 <= top and bottom <= 800 and right <= 1280


def test_every_plot_loads(page):
    images = page.evaluate("[...document.images].map(i => [i.alt, i.complete && i.naturalWidth > 0])")
    assert images and all(ok for _, ok in images), [alt for alt, ok in images if not ok]
