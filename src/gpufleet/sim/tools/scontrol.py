"""Fake Slurm `scontrol update nodename=<node> state=drain|resume [reason=...]` and `scontrol show node`.

Records every call (argv and time) in the node's state under ``scheduler_calls`` and keeps the
node's Slurm state (``slurm_state``: IDLE, DRAIN, ...). Like the real tool, a successful update
prints nothing and exits 0; an unknown node or state is an error on stderr with exit 1.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from gpufleet.sim.state import locked

_STATES = {"drain": "IDLE+DRAIN", "resume": "IDLE", "down": "DOWN", "idle": "IDLE", "undrain": "IDLE"}


def _pairs(args: list[str]) -> dict[str, str]:
    values = {}
    for arg in args:
        key, sep, value = arg.partition("=")
        if sep:
            values[key.lower()] = value
    return values


def main(argv: list[str], node_dir: Path) -> int:
    with locked(node_dir) as state:
        call = {"tool": "scontrol", "argv": argv, "time": time.time()}
        state.setdefault("scheduler_calls", []).append(call)
        hostname = state.get("hostname") or node_dir.name
        if argv[:1] == ["update"]:
            values = _pairs(argv[1:])
            node, wanted = values.get("nodename"), values.get("state", "").lower()
            if not node:
                print("scontrol: error: Invalid update command: no NodeName given", file=sys.stderr)
                return 1
            if wanted not in _STATES:
                given = values.get("state", "")
                print(f"scontrol: error: Invalid node state specified: {given}", file=sys.stderr)
                return 1
            if wanted == "drain" and not values.get("reason"):
                denied = "You must specify a reason when DOWNING or DRAINING a node. Request denied"
                print(denied, file=sys.stderr)
                return 1
            state["slurm_state"] = _STATES[wanted]
            state["slurm_reason"] = values.get("reason") if wanted == "drain" else None
            return 0
        if argv[:2] == ["show", "node"]:
            print(f"NodeName={hostname} Arch=x86_64 CoresPerSocket=56")
            print(f"   State={state.get('slurm_state', 'IDLE')} ThreadsPerCore=2")
            if state.get("slurm_reason"):
                print(f"   Reason={state['slurm_reason']} [root@{hostname}]")
            return 0
    print(f"scontrol: error: Invalid command: {' '.join(argv[:1])}", file=sys.stderr)
    return 1
