"""The files a report is written as: report.json (machines), report.md (people), gpufleet.prom
(node_exporter's textfile collector) and report.html. The writers import the report, never the other
way round."""

from __future__ import annotations

import json
from pathlib import Path

from gpufleet import atomic_file, markdown_report, prom
from gpufleet.report import Report

FORMATS = ("md", "json", "prom", "html")
FILES = {"json": "report.json", "md": "report.md", "prom": "gpufleet.prom", "html": "report.html"}


def render(report: Report, kind: str) -> str:
    """One of FORMATS: report.json's text, report.md's, gpufleet.prom's or report.html's."""
    if kind == "json":
        return json.dumps(report.as_dict(), indent=2, sort_keys=False) + "\n"
    if kind == "md":
        return markdown_report.render(report)
    if kind == "prom":
        return prom.render(report)
    if kind == "html":
        # imported here: the page's templates and charts are needed only when a page is written
        from gpufleet import html_report

        return html_report.render(report)
    raise ValueError(f"unknown report format {kind!r}, expected one of {', '.join(FORMATS)}")


def write(report: Report, directory: Path, kinds: tuple[str, ...] = FORMATS) -> dict[str, Path]:
    """Writes the files atomically (a textfile collector must never read half a file), never through
    a link planted in ``directory`` (atomic_file). What a signal asked of the run is the report's own
    (``report.interrupted``: the CLI sets it from the run's interrupt.Interrupt)."""
    directory.mkdir(parents=True, exist_ok=True)
    outputs = {kind: (directory / FILES[kind], render(report, kind)) for kind in kinds}
    for path, text in outputs.values():
        atomic_file.replace(path, text)
    return {kind: path for kind, (path, _) in outputs.items()}
