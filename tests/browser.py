"""Opens a page in a real headless Chromium (Debian's /usr/bin/chromium, driven by Playwright) and
says what a person would see: what the console and the page complained about, every URL it
requested, the heat map's cells, the visible text, whether each burn-in chart is drawn, how long it
took to load, and a full-page screenshot.

Not a test file: tests/unit/test_html_report.py and bench/report_html.py use it. Without Chromium or
Playwright it raises BrowserMissing (a test fails, it never skips): `make setup` installs both.

    with Chromium() as chromium:            # one browser for many pages
        facts = chromium.open_page(path, screenshot)
    facts = open_page(path, screenshot)     # a browser of its own, closed after
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Playwright

CHROMIUM = Path(os.environ.get("GPUFLEET_CHROMIUM", "/usr/bin/chromium"))
# The tests' screenshots (and anything else they keep for a person): reports/ is git-ignored.
ARTIFACTS = Path(os.environ.get("GPUFLEET_ARTIFACTS", "reports/test-artifacts"))

_CHARTS_JS = """() => Array.from(document.querySelectorAll('figure[data-chart]')).map((fig) => {
  const svg = fig.querySelector('svg');
  const box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
  const paths = svg ? Array.from(svg.querySelectorAll('path')).filter(
      (p) => (p.getAttribute('d') || '').trim().length > 0).length : 0;
  return {host: fig.getAttribute('data-chart'), paths: paths, width: box.width, height: box.height};
})"""
_LOAD_JS = """() => {
  const nav = performance.getEntriesByType('navigation')[0];
  return nav ? nav.loadEventEnd - nav.startTime : -1;
}"""


class BrowserMissing(RuntimeError):
    """Chromium or Playwright is not installed here."""


@dataclass
class Chart:
    """One burn-in chart in the page (``figure[data-chart]``)."""

    host: str
    paths: int  # <path> elements with a non-empty d
    width: float
    height: float

    @property
    def drawn(self) -> bool:
        return self.paths > 0 and self.width > 0 and self.height > 0


@dataclass
class PageFacts:
    url: str
    console: list[str] = field(default_factory=list)  # "error: ..." / "warning: ..." console messages
    page_errors: list[str] = field(default_factory=list)  # uncaught exceptions in the page's script
    requests: list[str] = field(default_factory=list)  # every URL the page requested, the page first
    cells: int = 0  # heat-map cells ([data-cell])
    columns: list[str] = field(default_factory=list)  # the heat map's column headers (a setting or family)
    text: str = ""  # the visible text (document.body.innerText)
    charts: list[Chart] = field(default_factory=list)
    load_ms: float = 0.0  # navigation start to the load event's end (Navigation Timing)
    screenshot: Path | None = None

    def chart(self, host: str) -> Chart | None:
        return next((c for c in self.charts if c.host == host), None)

    def external_requests(self) -> list[str]:
        """Every request other than the page's own file."""
        return [u for u in self.requests if u != self.url]


def _require() -> None:
    if not CHROMIUM.exists():
        raise BrowserMissing(f"{CHROMIUM} is missing: `make setup` installs Debian's chromium")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError as exc:
        raise BrowserMissing(f"Playwright for Python is missing ({exc}): `make setup` installs it") from None
    if shutil.which(str(CHROMIUM)) is None:
        raise BrowserMissing(f"{CHROMIUM} is not executable: `make setup` installs Debian's chromium")


class Chromium:
    """One headless Chromium for several pages, closed on exit (also when a page fails)."""

    def __init__(self) -> None:
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None

    def __enter__(self) -> Chromium:
        _require()
        from playwright.sync_api import sync_playwright

        self._playwright = sync_playwright().start()
        try:
            self._browser = self._playwright.chromium.launch(
                executable_path=str(CHROMIUM),
                headless=True,
                # root in a container: no user namespaces for Chromium's sandbox
                args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
            )
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        try:
            if self._browser is not None:
                self._browser.close()
        finally:
            self._browser = None
            if self._playwright is not None:
                self._playwright.stop()
                self._playwright = None

    def open_page(self, path: Path, screenshot: Path | None = None, *, timeout_s: float = 60.0) -> PageFacts:
        if self._browser is None:
            raise RuntimeError("Chromium is not started: use it as a context manager")
        url = path.resolve().as_uri()
        facts = PageFacts(url=url)
        context = self._browser.new_context(viewport={"width": 1400, "height": 900})
        try:
            page = context.new_page()
            page.on("console", lambda msg: _console(facts, msg))
            page.on("pageerror", lambda error: facts.page_errors.append(str(error)))
            page.on("request", lambda request: facts.requests.append(request.url))
            page.goto(url, wait_until="load", timeout=timeout_s * 1000)
            facts.load_ms = float(page.evaluate(_LOAD_JS))
            facts.cells = int(page.locator("[data-cell]").count())
            headers = page.locator("table.heat-map th.setting span")
            facts.columns = [str(t) for t in headers.all_text_contents()]
            facts.text = str(page.evaluate("() => document.body.innerText"))
            facts.charts = [
                Chart(str(c["host"]), int(c["paths"]), float(c["width"]), float(c["height"]))
                for c in page.evaluate(_CHARTS_JS)
            ]
            if screenshot is not None:
                screenshot.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(screenshot), full_page=True, timeout=timeout_s * 1000)
                facts.screenshot = screenshot
        finally:
            context.close()
        return facts


def _console(facts: PageFacts, message: Any) -> None:
    if message.type in ("error", "warning"):
        facts.console.append(f"{message.type}: {message.text}")


def open_page(path: Path, screenshot: Path | None = None) -> PageFacts:
    """``path`` opened from its file:// URL in a headless Chromium of its own, always closed after."""
    with Chromium() as chromium:
        return chromium.open_page(path, screenshot)
