"""`gpufleet provision`: every role applied to every node (playbooks/provision.yml); `--check` is its
check mode (gpufleet check is that run with diff)."""

from __future__ import annotations

import argparse
from functools import partial
from typing import Any

from gpufleet import runner
from gpufleet.commands.base import (
    BREAK_LOCK_HELP,
    CHECK_HELP,
    TAGS_HELP,
    Command,
    CommonOptions,
    Run,
    reported_facts,
    run_reported,
)
from gpufleet.progress import Display
from gpufleet.report import HostReport, Report, now


def provision_host(result: runner.HostResult, check_mode: bool) -> HostReport:
    host = HostReport(checks=result.checks, changes=result.changes, facts=reported_facts(result.facts))
    notes = list(result.hints)
    if result.reboot_required:
        notes.insert(0, "reboot required for a change to take effect")
    if result.unreachable or result.failed:
        notes.insert(0, result.failure_message())
    host.status = result.status(check_mode)
    host.message = "; ".join(n for n in notes if n)
    host.configuration_error = result.refused_for_input()
    return host


def apply(options: CommonOptions, playbook: str, command: str, display: Display | None = None) -> Report:
    """A run of a playbook that changes hosts (or says what it would, in check mode): the report of
    ``command`` ('provision --check' in check mode), unwritten."""
    report = Report(command=f"{command} --check" if options.check else command, started=now())
    result = run_reported(
        report,
        options.run_options(
            playbook, tags=options.tags, check=options.check, diff=options.diff, break_lock=options.break_lock
        ),
        display,
    )
    for name, host in result.hosts.items():
        report.hosts[name] = provision_host(host, options.check)
    report.finished = now()
    return report


def provision(options: CommonOptions, display: Display | None = None) -> Report:
    """playbooks/provision.yml: every role, in order; changes per host in the report."""
    return apply(options, "provision.yml", "provision", display)


def options_of(args: argparse.Namespace, run: Run) -> CommonOptions:
    return run.target(
        CommonOptions,
        tags=args.tags,
        check=args.check,
        diff=args.diff,
        break_lock=getattr(args, "break_lock", False),
    )


def _run(command: Command, args: argparse.Namespace, run: Run) -> Report:
    return provision(options_of(args, run), run.progress)


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tags", "-t", help=TAGS_HELP)
    parser.add_argument("--check", action="store_true", help=CHECK_HELP)
    parser.add_argument("--diff", action="store_true", help="show file and setting differences")
    parser.add_argument("--break-lock", action="store_true", help=BREAK_LOCK_HELP)


def _checking(args: argparse.Namespace) -> bool:
    return bool(args.check)


# A command that applies roles (provision, switch): it changes nodes unless --check, a --check run is
# reported as "<command> --check", and each host is judged as provision judges it.
APPLIES_ROLES: dict[str, Any] = dict(
    changes=lambda args: not args.check,
    variant="--check",
    variant_on=_checking,
    judge=partial(provision_host, check_mode=False),
    check_judge=partial(provision_host, check_mode=True),
)

COMMAND = Command(
    name="provision",
    summary="apply every role (playbooks/provision.yml) and report changes",
    description="Apply every role to every node (playbooks/provision.yml), in order, and report per host "
    "what changed. Each node is judged before the first change (every role planned, read-only). "
    "--check reports what would change and changes nothing.",
    add_arguments=_arguments,
    run=_run,
    playbook="provision.yml",
    **APPLIES_ROLES,
)
