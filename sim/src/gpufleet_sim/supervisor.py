"""Keeps a simulated fleet alive after `gpufleet-sim up` returns, and stops it on SIGTERM.

It owns the node processes (and so reaps them); `gpufleet-sim down` signals it. A node that
dies is recorded as down (what died, how) and stays down until `gpufleet-sim reboot` (or a reset
through its BMC) starts it again; nothing a node or a request does ends the supervisor before `sim
down` asks it to. The requests are the Fleet's to carry out (Fleet.service_requests), as a
test-owned fleet's thread does.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path
from types import FrameType

from gpufleet_sim.fleet import REQUEST_POLL_S, Fleet, FleetConfig, SimError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpufleet-sim-supervisor")
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--nodes", type=int, required=True)
    parser.add_argument("--profile", required=True)
    parser.add_argument("--subnet", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--slurm", action="store_true")
    parser.add_argument("--sonic-leaf", action="append", default=[])
    args = parser.parse_args(argv)
    fleet = Fleet(args.dir)
    stopping = False

    def _stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        config = FleetConfig(
            args.nodes, args.profile, args.subnet, args.port, args.slurm, tuple(args.sonic_leaf)
        )
        fleet.up(config, managed=True)
    except SimError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 1
    print("ready", flush=True)
    try:
        while not stopping:
            try:
                for news in fleet.poll():
                    print(f"warning: {news}", file=sys.stderr, flush=True)
                # `gpufleet-sim reboot` and the BMCs' resets ask by file; each answer is left beside it
                for line in fleet.service_requests():
                    print(f"reset {line}", flush=True)
            except Exception as exc:  # logged: the fleet must outlive one bad look
                print(f"warning: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
            time.sleep(REQUEST_POLL_S)
    finally:
        left = fleet.stop()
    if left:
        print(f"error: still running: {', '.join(left)}", file=sys.stderr, flush=True)
        return 1
    print("stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
