"""`gpufleet report`: a report printed again (its files rebuilt from report.json), or built from the
events of a run made elsewhere (--from-events). Runs no playbook."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path

from gpufleet import from_events, preflight, report_files
from gpufleet import report as report_mod
from gpufleet.commands.base import DEFAULT_REPORT_DIR, Command, UsageError, exit_status


def again(report_dir: Path, fmt: str) -> int:
    """An existing report again: printed in one format, report.md, gpufleet.prom and report.html
    rebuilt from report.json; the exit status is the one the command that wrote it returned."""
    report = report_mod.load(report_dir / report_files.FILES["json"])
    try:
        report_files.write(report, report_dir, kinds=("md", "prom", "html"))
    except OSError as exc:
        raise UsageError(f"cannot rebuild the report files in {report_dir}: {exc}") from None
    sys.stdout.write(report_files.render(report, fmt))
    return exit_status(report)


def of_events(directories: list[Path], report_dir: Path, fmt: str, commands: Mapping[str, Command]) -> int:
    """The report of a run made elsewhere (an execution node, an AWX job's slices), from its events,
    each host judged by its command's judge (``commands``): written into report_dir, printed in one
    format; the exit status the command would have returned."""
    preflight.report_dir(report_dir)
    report = from_events.report_of(directories, commands)
    report_files.write(report, report_dir)
    sys.stdout.write(report_files.render(report, fmt))
    return exit_status(report)


def _alone(args: argparse.Namespace, commands: Mapping[str, Command]) -> int:
    if args.from_events:
        return of_events(args.from_events, args.report_dir, args.format, commands)
    return again(args.report_dir, args.format)


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--report-dir", type=Path, default=DEFAULT_REPORT_DIR, help="where the report is")
    parser.add_argument("--format", choices=report_files.FORMATS, default="md", help="what to print")
    parser.add_argument(
        "--from-events",
        type=Path,
        nargs="+",
        metavar="DIR",
        help="build the report from these ansible-runner artifact directories (job_events/; one per slice "
        "of a job, merged) and write it into --report-dir",
    )


COMMAND = Command(
    name="report",
    summary="print the report in DIR/report.json again; rebuild report.md, gpufleet.prom and report.html",
    description="Print the report in --report-dir's report.json again, in one --format, and rebuild "
    "report.md, gpufleet.prom and report.html from it; the exit status is the one its command returned. "
    "--from-events builds the report of a run made elsewhere (an execution node, an AWX job's slices) "
    "from its ansible-runner events, each host judged as a local run of its command judges it.",
    add_arguments=_arguments,
    alone=_alone,
)
