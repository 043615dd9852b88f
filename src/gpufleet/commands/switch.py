"""`gpufleet switch`: the lossless RoCE profile on the leaf switches (playbooks/switch_qos.yml)."""

from __future__ import annotations

import argparse
from functools import partial

from gpufleet import runner
from gpufleet.commands.base import CHECK_HELP, Command, CommonOptions, Run
from gpufleet.commands.provision import apply, provision_host
from gpufleet.progress import Display
from gpufleet.report import Report


def switch(options: CommonOptions, display: Display | None = None) -> Report:
    """playbooks/switch_qos.yml: the lossless RoCE profile on the leaf switches; changes per switch."""
    return apply(options, "switch_qos.yml", "switch", display)


def _run(command: Command, args: argparse.Namespace, run: Run) -> Report:
    options = CommonOptions(
        run.inventory,
        run.limit,
        run.report_dir,
        check=args.check,
        diff=True,
        vault_password_file=run.vault_password_file,
    )
    return switch(options, run.progress)


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--check", action="store_true", help=CHECK_HELP)
    parser.set_defaults(diff=True, tags=None)


def _validate(args: argparse.Namespace) -> None:
    if args.limit is None:
        # the switch play reaches the leaves only; the lock and the preflight need no more
        args.limit = runner.SWITCH_GROUP


def _checking(args: argparse.Namespace) -> bool:
    return bool(args.check)


COMMAND = Command(
    name="switch",
    summary="apply the lossless RoCE profile on the leaf switches (NVUE); --check: what would change",
    description="Apply the lossless RoCE profile (PFC, ECN, DSCP map, MTU) on the leaf switches through "
    "NVUE, one revision per leaf, read back. The only run that changes a switch; --check reports what "
    "would change. Without --limit it reaches every leaf (the leaf_switches group).",
    add_arguments=_arguments,
    run=_run,
    playbook="switch_qos.yml",
    changes=lambda args: not args.check,
    validate=_validate,
    variant="--check",
    variant_on=_checking,
    judge=partial(provision_host, check_mode=False),
    check_judge=partial(provision_host, check_mode=True),
)
