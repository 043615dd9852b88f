"""`gpufleet switch`: the lossless RoCE profile on the leaf switches (playbooks/switch_qos.yml)."""

from __future__ import annotations

import argparse

from gpufleet import runner
from gpufleet.commands.base import CHECK_HELP, Command, CommonOptions, Run
from gpufleet.commands.provision import APPLIES_ROLES, apply
from gpufleet.progress import Display
from gpufleet.report import Report


def switch(options: CommonOptions, display: Display | None = None) -> Report:
    """playbooks/switch_qos.yml: the lossless RoCE profile on the leaf switches; changes per switch."""
    return apply(options, "switch_qos.yml", "switch", display)


def _run(command: Command, args: argparse.Namespace, run: Run) -> Report:
    options = run.target(CommonOptions, check=args.check, diff=True)
    return switch(options, run.progress)


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--check", action="store_true", help=CHECK_HELP)
    parser.set_defaults(diff=True, tags=None)


def _validate(args: argparse.Namespace) -> None:
    if args.limit is None:
        # the switch play reaches the leaves only; the lock and the preflight need no more
        args.limit = runner.SWITCH_GROUP


COMMAND = Command(
    name="switch",
    summary="apply the lossless RoCE profile on the leaf switches (NVUE); --check: what would change",
    description="Apply the lossless RoCE profile (PFC, ECN, DSCP map, MTU) on the leaf switches through "
    "NVUE, one revision per leaf, read back. The only run that changes a switch; --check reports what "
    "would change. Without --limit it reaches every leaf (the leaf_switches group).",
    add_arguments=_arguments,
    run=_run,
    playbook="switch_qos.yml",
    validate=_validate,
    **APPLIES_ROLES,
)
