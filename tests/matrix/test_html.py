"""The generated HTML rendered by headless Chromium: the grid, grade colours, evidence links, and a
first screen that fits 1400 pixels without scrolling sideways."""

from __future__ import annotations

import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.conftest import Chromium
from tests.matrix.conftest import Invoke
from tests.matrix.test_cli import full_evidence


class Cells(HTMLParser):
    """Collects each grid cell's grade and each cell detail's evidence links from the rendered DOM."""

    def __init__(self) -> None:
        super().__init__()
        self.grades: dict[str, str] = {}
        self.links: dict[str, list[str]] = {}
        self.current: str | None = None
        self.legend = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "td" and a.get("data-cell"):
            self.grades[str(a["data-cell"])] = str(a.get("data-grade"))
        elif tag == "section" and a.get("data-cell"):
            self.current = str(a["data-cell"])
            self.links[self.current] = []
        elif tag == "a" and self.current and a.get("class") == "evidence" and a.get("href"):
            self.links[self.current].append(str(a["href"]))
        elif tag == "table" and a.get("id") == "legend":
            self.legend = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "section":
            self.current = None


def test_html_renders_in_headless_chromium(
    repo: Path, run_matrix: Invoke, tmp_path: Path, chromium: Chromium
) -> None:
    full_evidence(repo, run_matrix, tmp_path)
    assert run_matrix("generate").exit_code == 0
    page = repo / "reports" / "support-matrix.html"
    parsed = Cells()
    parsed.feed(chromium.dump_dom(page.as_uri()))
    assert parsed.legend
    assert parsed.grades["sac/g1_walk_flat/mujoco@linux-cpu"] == "Benchmarked"
    assert parsed.grades["sac/g1_walk_flat/mjwarp@linux-cpu"] == "Unsupported"
    links = parsed.links["sac/g1_walk_flat/mujoco@linux-cpu"]
    assert len(links) == 3
    for href in links:  # evidence links resolve to the filed files
        assert (page.parent / href).resolve().is_file(), href

    shot = chromium.screenshot(page.as_uri(), tmp_path / "matrix.png", "1400,2400")
    import matplotlib.image

    pixels = (matplotlib.image.imread(str(shot))[:, :, :3] * 255).round()

    def shows(rgb: tuple[int, int, int]) -> bool:
        return bool((abs(pixels - rgb).max(axis=2) <= 2).any())

    assert shows((0xA5, 0xD8, 0xFF))  # a Benchmarked cell is painted in its grade colour
    assert shows((0xFF, 0xF3, 0xBF))  # Configured
    assert shows((0xE9, 0xEC, 0xEF))  # Unsupported


# Opens every <details> and writes the page's widths into the DOM for --dump-dom to carry out.
MEASURE = (
    "<script>document.querySelectorAll('details').forEach(d => { d.open = true; });"
    "const e = document.documentElement;"
    "document.body.dataset.scrollWidth = String(e.scrollWidth);"
    "document.body.dataset.clientWidth = String(e.clientWidth);"
    "document.body.dataset.gridBottom = String(Math.ceil(document.getElementById('grid')"
    ".getBoundingClientRect().bottom));</script>"
)


def test_the_page_fits_1400_pixels_without_sideways_scrolling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chromium: Chromium
) -> None:
    from tests.matrix.test_render_grid import real_shape_repo

    repo = real_shape_repo(tmp_path, monkeypatch)
    page = (repo / "reports" / "support-matrix.html").read_text()
    measured = tmp_path / "measure.html"
    measured.write_text(page.replace("</body>", MEASURE + "</body>"))
    dom = chromium.dump_dom(measured.as_uri(), "--window-size=1400,900")
    found = dict(re.findall(r'data-(scroll-width|client-width|grid-bottom)="(\d+)"', dom))
    assert found.keys() == {"scroll-width", "client-width", "grid-bottom"}, dom[-2000:]
    assert int(found["scroll-width"]) <= 1400
    assert int(found["scroll-width"]) <= int(found["client-width"])  # nothing overflows sideways
    assert int(found["grid-bottom"]) <= 900  # the whole grid is on the first screen
    assert page.index('id="grid"') < page.index('id="capabilities"') < page.index('id="cells"')


def test_a_missing_chromium_fails_the_page_tests_naming_it(tmp_path: Path) -> None:
    """Without Chromium on PATH a page-rendering test fails (no skip, no silent pass) and says what to
    install."""
    root = Path(__file__).resolve().parents[2]
    node = "tests/matrix/test_html.py::test_the_page_fits_1400_pixels_without_sideways_scrolling"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA", node],
        cwd=root, capture_output=True, text=True, timeout=300, check=False,
        env={"PATH": str(tmp_path), "HOME": str(tmp_path), "COLUMNS": "400"},
    )  # fmt: skip
    assert done.returncode == 1, done.stdout[-3000:]
    assert "1 error" in done.stdout and "skipped" not in done.stdout and "passed" not in done.stdout
    assert "chromium is not installed" in done.stdout and "apt-get install -y chromium" in done.stdout
