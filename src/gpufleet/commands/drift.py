"""`gpufleet drift [--fix]`: every role compared with every node; --fix rolls the roles out to the
drifted nodes in batches (the work is gpufleet.drift's)."""

from __future__ import annotations

import argparse

from gpufleet import drift as drift_mod
from gpufleet import events
from gpufleet.commands.base import BREAK_LOCK_HELP, Command, Run, UsageError
from gpufleet.report import Report


def fix_status(host: events.HostResult) -> str:
    """A node of a drift --fix batch as the fix reports it; the leaves it reads keep drift's verdict."""
    return drift_mod.drift_host(host).status if host.only_read_leaf() else drift_mod.fixed_status(host)


def _run(command: Command, args: argparse.Namespace, run: Run) -> Report:
    options = run.target(
        drift_mod.DriftOptions,
        fix=args.fix,
        batch=args.batch,
        max_fail_percent=args.max_fail_percent,
        break_lock=args.break_lock,
    )
    return drift_mod.drift(options, run.progress)


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--fix", action="store_true", help="apply the roles to drifted nodes, in batches")
    parser.add_argument("--batch", default="10%", help="nodes per batch with --fix: a count or a percentage")
    parser.add_argument("--break-lock", action="store_true", help=f"with --fix: {BREAK_LOCK_HELP}")
    parser.add_argument(
        "--max-fail-percent",
        type=float,
        default=0.0,
        metavar="P",
        help="stop the rollout when more than P percent of a batch fails (0..100; default 0: the first "
        "failure stops it)",
    )


def _validate(args: argparse.Namespace) -> None:
    if not 0 <= args.max_fail_percent <= 100:
        raise UsageError(f"--max-fail-percent must be 0..100, got {args.max_fail_percent:g}")
    drift_mod.batch_size(args.batch, 1)


def _fixing(args: argparse.Namespace) -> bool:
    return bool(args.fix)


COMMAND = Command(
    name="drift",
    summary="compare every role with every node; --fix rolls the roles out",
    description="Compare every role with every node (playbooks/drift.yml: one read-only task per node, "
    "the same plan as provision --check) and the nodes' driver, CUDA, VBIOS and firmware versions with "
    "their peers'. --fix rolls the roles out to the drifted nodes, in batches (judge, drain, every role, "
    "undrain), and stops when a batch fails more than --max-fail-percent.",
    add_arguments=_arguments,
    run=_run,
    playbook="drift.yml",
    changes=_fixing,
    validate=_validate,
    variant="--fix",
    variant_on=_fixing,
    judge=drift_mod.drift_host,
    across_hosts=drift_mod.compare_versions,
    later_playbooks={"drift_fix.yml": fix_status},
)
