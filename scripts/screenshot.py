"""A report.html as a PNG, taken in the tests' headless Chromium (tests/browser.py): README's picture
of the demo's gate (`make screenshot`).

usage: python scripts/screenshot.py REPORT.html OUT.png
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.browser import open_page


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    page, out = Path(argv[0]), Path(argv[1])
    if not page.is_file():
        print(
            f"{page}: no such report page (make demo writes reports/demo/gate/report.html)", file=sys.stderr
        )
        return 2
    facts = open_page(page, out)
    if facts.console or facts.page_errors:
        print(f"{page}: the page logged {facts.console + facts.page_errors}", file=sys.stderr)
        return 1
    print(f"{out}: {page} in Chromium, {len(facts.charts)} burn-in charts")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
