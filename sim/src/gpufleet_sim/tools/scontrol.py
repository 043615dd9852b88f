"""Fake Slurm `scontrol update nodename=<node> state=drain|resume [reason=...]`, `... reason=...` alone and
`scontrol show node`,
for a fleet without a real Slurm cluster (sim/slurm.py is the real one, `gpufleet-sim up --slurm`).

Records every call (argv and time) in the node's state under ``scheduler_calls`` and keeps the
node's Slurm state (``slurm_state``: IDLE, IDLE+DRAIN, ...). It answers as Slurm 22.05's scontrol
does (tests/fixtures/real/slurm/): an update prints nothing and exits 0; `show node` prints the
multi-line form, a reason with its ``[user@time]``; a state it does not take or a drain without a
reason is refused with the real message and exit 1.

Not modelled: node names. A site's Slurm name for a node need not be its hostname (the drain role's
drain_node_name), and this fake cannot know the site's names, so it takes any name as its own node;
the real controller's `Invalid node name specified` is in the captures and meets gpufleet only with a
real Slurm (sim/slurm.py).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from gpufleet_sim.state import locked

# the update states gpufleet uses, and what `show node` then reads on an idle node
_STATES = {"drain": "IDLE+DRAIN", "resume": "IDLE", "undrain": "IDLE", "down": "DOWN"}
_BAD_STATE = (
    "Invalid input: state={given}\nRequest aborted\n"
    "Valid states are: NoResp DRAIN FAIL FUTURE RESUME POWER_DOWN POWER_UP UNDRAIN\n"
    "Not all states are valid given a node's prior state"
)
_NO_REASON = "You must specify a reason when DOWNING or DRAINING a node. Request denied"


def _pairs(args: list[str]) -> dict[str, str]:
    values = {}
    for arg in args:
        key, sep, value = arg.partition("=")
        if sep:
            values[key.lower()] = value
    return values


def _show(name: str, node: dict[str, object]) -> str:
    """The multi-line `scontrol show node` of a one-CPU node called ``name``, as 22.05 prints it."""
    lines = [
        f"NodeName={name} Arch=x86_64 CoresPerSocket=1 ",
        "   CPUAlloc=0 CPUEfctv=1 CPUTot=1 CPULoad=0.00",
        "   AvailableFeatures=(null)",
        "   ActiveFeatures=(null)",
        "   Gres=(null)",
        f"   NodeAddr={name} NodeHostName={name} Version=22.05.8",
        f"   State={node.get('slurm_state', 'IDLE')} ThreadsPerCore=1 TmpDisk=0 Weight=1 "
        "Owner=N/A MCS_label=N/A",
        "   Partitions=gpu ",
    ]
    if node.get("slurm_reason"):
        lines.append(f"   Reason={node['slurm_reason']} [root@{node.get('slurm_reason_time', '')}]")
    return "\n".join(lines) + "\n\n"


def _update(argv: list[str], node: dict[str, object]) -> int:
    values = _pairs(argv[1:])
    if "state" not in values and values.get("reason"):
        # a reason alone changes the reason, not the state (the gate naming the checks of a node it drained;
        # the real slurmctld takes it: tests/integration/test_gate_faults.py)
        node["slurm_reason"] = values["reason"]
        node["slurm_reason_time"] = time.strftime("%Y-%m-%dT%H:%M:%S")
        return 0
    wanted = values.get("state", "").lower()
    if wanted not in _STATES:
        print(_BAD_STATE.format(given=values.get("state", "")), file=sys.stderr)
        return 1
    if wanted in ("drain", "down") and not values.get("reason"):
        print(_NO_REASON, file=sys.stderr)
        return 1
    node["slurm_state"] = _STATES[wanted]
    node["slurm_reason"] = values.get("reason") if wanted in ("drain", "down") else None
    node["slurm_reason_time"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    return 0


def main(argv: list[str], node_dir: Path) -> int:
    with locked(node_dir) as state:
        call = {"tool": "scontrol", "argv": argv, "time": time.time()}
        state.setdefault("scheduler_calls", []).append(call)
        hostname = state.get("hostname") or node_dir.name
        if argv[:1] == ["update"]:
            return _update(argv, state)
        if argv[:2] == ["show", "node"]:
            sys.stdout.write(_show(argv[2] if len(argv) > 2 else hostname, state))
            return 0
    print(f"scontrol: error: Invalid command: {' '.join(argv[:1])}", file=sys.stderr)
    return 1
