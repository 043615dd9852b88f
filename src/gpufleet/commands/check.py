"""`gpufleet check`: provision's check mode with diff: the same run, report and exit statuses."""

from __future__ import annotations

import argparse

from gpufleet.commands import provision
from gpufleet.commands.base import TAGS_HELP, Command, Run
from gpufleet.report import Report


def _run(command: Command, args: argparse.Namespace, run: Run) -> Report:
    return provision.provision(provision.options_of(args, run), run.progress)


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tags", "-t", help=TAGS_HELP)
    parser.set_defaults(check=True, diff=True)


COMMAND = Command(
    name="check",
    summary="what provision would change on every node (check mode, diff); changes nothing",
    description="What gpufleet provision would change on every node: provision's run in check mode, with "
    "diff. Changes nothing; its report is provision's (provision --check).",
    add_arguments=_arguments,
    run=_run,
    playbook="provision.yml",
    reports_as="provision",
    variant="--check",
    variant_on=lambda args: True,
)
