"""`gpufleet watch`: one read-only look at every serving node (the work is gpufleet.watch's); with
--act, the guardian: it takes unsafe nodes out of service and remediates them (gpufleet.guardian's)."""

from __future__ import annotations

import argparse

from gpufleet import guardian
from gpufleet import watch as watch_mod
from gpufleet.commands.base import Command, Run, UsageError
from gpufleet.report import Report


def _run(command: Command, args: argparse.Namespace, run: Run) -> Report:
    if not args.act:
        options = run.target(watch_mod.WatchOptions, window_s=args.window)
        return watch_mod.watch(options, run.progress)
    acting = run.target(
        guardian.GuardianOptions,
        window_s=args.window,
        check=args.check,
        burn_in_seconds=args.burn_in_seconds,
        listing=run.listing,
    )
    return guardian.guard(acting, run.progress)


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--window",
        type=float,
        help="seconds each node is watched, 1..300 (default: watch_window_s, 5); the module checks it",
    )
    parser.add_argument(
        "--act",
        action="store_true",
        help="take the nodes that are unsafe to serve out of service (drain, stop), remediate them as the "
        "inventory's guardian_remediation says, gate them and return those that pass (docs/guardian.md)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="with --act: say what it would quarantine, reset, reboot or escalate, change nothing",
    )
    parser.add_argument(
        "--burn-in-seconds",
        type=int,
        help="with --act: the gate's burn-in after a remediation, 1..3600 "
        "(default: thermal_gate_burn_in_seconds)",
    )


def _validate(args: argparse.Namespace) -> None:
    if not args.act and (args.check or args.burn_in_seconds is not None):
        raise UsageError("--check and --burn-in-seconds go with --act (a plain watch changes nothing)")
    if args.burn_in_seconds is not None and not 1 <= args.burn_in_seconds <= 3600:
        raise UsageError(f"--burn-in-seconds must be between 1 and 3600, got {args.burn_in_seconds}")


def _acting(args: argparse.Namespace) -> bool:
    return bool(args.act)


COMMAND = Command(
    name="watch",
    summary="look at every serving node: power caps, throttling, RoCE, vLLM; --act takes unsafe ones out",
    description="One look at every serving node (playbooks/watch.yml) over a short window: enforced power "
    "limits, throttling, the RoCE links, the vLLM instances and the GPUs' health. Made for a schedule "
    "(docs/watch.md). Plain, it is read-only: takes no lock, never stops a node. With --act "
    "(docs/guardian.md) a node unsafe to serve (a GPU lost, a blocking Xid, uncorrectable ECC, a row "
    "remap, NVLink or a RoCE port down, temperatures or coolant past the gate's limits) is drained and "
    "its instances stopped, remediated where the inventory opts in, gated and returned if it passes; a "
    "circuit breaker bounds how many nodes it takes out; --check says what it would do.",
    add_arguments=_arguments,
    run=_run,
    playbook="watch.yml",
    validate=_validate,
    extravars=lambda args: watch_mod.extravars(args.window),
    variant="--act",
    variant_on=_acting,
    judge=watch_mod.watch_host,
)
