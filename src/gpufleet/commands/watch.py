"""`gpufleet watch`: one read-only look at every serving node (the work is gpufleet.watch's)."""

from __future__ import annotations

import argparse

from gpufleet import watch as watch_mod
from gpufleet.commands.base import Command, Run
from gpufleet.report import Report


def _run(command: Command, args: argparse.Namespace, run: Run) -> Report:
    options = run.target(watch_mod.WatchOptions, window_s=args.window)
    return watch_mod.watch(options, run.progress)


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--window",
        type=float,
        help="seconds each node is watched, 1..300 (default: watch_window_s, 5); the module checks it",
    )


COMMAND = Command(
    name="watch",
    summary="read-only look at every serving node: power caps, throttling, RoCE, vLLM (for a schedule)",
    description="One read-only look at every serving node (playbooks/watch.yml) over a short window: "
    "enforced power limits, throttling, the RoCE links, the vLLM instances and the GPUs' health. Made "
    "for a schedule (docs/watch.md): takes no lock, never stops a node.",
    add_arguments=_arguments,
    run=_run,
    playbook="watch.yml",
    extravars=lambda args: watch_mod.extravars(args.window),
    judge=watch_mod.watch_host,
)
