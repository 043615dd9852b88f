"""A simulated node's host power: its Redfish PowerState, what a reset asks of it, and a hung node.

A reset reaches the Fleet by file: `gpufleet-sim reboot` (control.reboot) and the node's BMC (a POST of
ComputerSystem.Reset) each leave REBOOT_REQUEST in the node's directory, holding what is asked (a
Redfish ResetType, or "reboot", which is ForceRestart); the Fleet that owns the node carries it out
(Fleet.service_requests: the supervisor's loop, or a test-owned fleet's thread) and leaves its answer
beside it (`reboot.done`).

The node's PowerState lives in its state (`power_state`, "On" when absent), written by the Fleet as
the node goes down and comes up, read by its BMC. A graceful reset needs the node's OS to act on it: a
node that is off, whose sshd is gone, or that hangs (the `node-hung` fault) ignores one, as a host
that does not answer its BMC's ACPI request does; the forced ones always work.

`node-hung`: every process of the node's PID namespace stopped (SIGSTOP), its sshd first among them,
so a connection is accepted by the kernel but never answered (ssh's "Connection timed out during
banner exchange"), and what ran in it runs no more. Clearing it continues them (SIGCONT); a power
cycle (a forced reset through the BMC, `gpufleet-sim reboot`, ForceOff) ends it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

from gpufleet_sim import processes
from gpufleet_sim.state import State

REBOOT_REQUEST = "reboot.request"
REBOOT_ANSWER = "reboot.done"
# What `gpufleet-sim reboot` asks: a forced restart (it always brings the node back).
SIM_REBOOT = "reboot"
HUNG = "node-hung"
# The node runs and answers SSH, but its OS never acts on the BMC's graceful request (a shutdown stuck
# on a driver that will not unload, ACPI events masked): only a forced reset brings it down.
GRACEFUL_IGNORED = "graceful-ignored"

ON, OFF, POWERING_ON, POWERING_OFF = "On", "Off", "PoweringOn", "PoweringOff"
# The ResetType values the BMC accepts, in the order bmcweb's ResetActionInfo lists them, but Nmi (no
# NMI to model) and PushPowerButton (bmcweb has none).
RESET_TYPES = (
    "ForceOff",
    "PowerCycle",
    "On",
    "ForceOn",
    "ForceRestart",
    "GracefulRestart",
    "GracefulShutdown",
)
GRACEFUL = ("GracefulRestart", "GracefulShutdown")
# What the Fleet does for a request.
REBOOT, POWER_OFF, POWER_ON, IGNORE = "reboot", "power off", "power on", "ignore"


def power_state(state: State) -> str:
    return str(state.get("power_state", ON))


def answers(state: State) -> bool:
    """The node's OS can act on a graceful request: not hung, not ignoring it (its running sshd is the
    Fleet's to say)."""
    found = state.get("faults", [])
    return HUNG not in found and GRACEFUL_IGNORED not in found


def plan(reset_type: str, power: str, os_answers: bool) -> tuple[str, str]:
    """(what the Fleet does, why) for a request; power is the node's PowerState, os_answers whether its
    OS runs and answers. A node that is off comes on for a forced restart or a power cycle (power is
    restored), and ignores the graceful ones (no OS to ask)."""
    if reset_type not in (*RESET_TYPES, SIM_REBOOT):
        return IGNORE, f"unknown reset type {reset_type!r}"
    off = power == OFF
    if reset_type in ("On", "ForceOn"):
        return (POWER_ON, "powered on") if off else (IGNORE, "already on")
    if reset_type == "ForceOff":
        return (IGNORE, "already off") if off else (POWER_OFF, "forced off")
    if reset_type in GRACEFUL:
        if off:
            return IGNORE, "off: no OS to ask"
        if not os_answers:
            return IGNORE, "the OS does not answer (hung, or its sshd is gone)"
        if reset_type == "GracefulRestart":
            return REBOOT, "restarted by its OS"
        return POWER_OFF, "shut down by its OS"
    return (POWER_ON, "powered on") if off else (REBOOT, "forced restart")


def request(node_dir: Path, reset_type: str) -> None:
    """Asks the node's Fleet for a reset (written whole: the Fleet never reads half a request)."""
    path = node_dir / REBOOT_REQUEST
    partial = path.with_name(path.name + ".partial")
    partial.write_text(reset_type, encoding="utf-8")
    os.replace(partial, path)


def powered_down(state: State, power: str) -> None:
    """The node's host went down (power is POWERING_ON for a restart, OFF for a power off): a hang
    ends with it."""
    state["power_state"] = power
    # what its BMC shows as the ComputerSystem's LastResetTime (bmcweb: the host state's last change)
    state["last_reset_time"] = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
    if HUNG in state.get("faults", []):
        state["faults"].remove(HUNG)


# -- node-hung -----------------------------------------------------------------------------------
def _signal_node(node_dir: Path, sig: signal.Signals) -> None:
    """``sig`` to every process of the node's PID namespace, as the fleet's record names it
    (<fleet>/nodes/<node>); nothing for a node that does not run."""
    record = processes.load(node_dir.parent.parent)
    parts = record.get("nodes", {}).get(node_dir.name, {})
    init, namespace = parts.get("sshd"), parts.get("pidns")
    if not isinstance(init, dict) or not namespace:
        return
    sshd = processes.Proc(int(init["pid"]), int(init["start"]))
    if not processes.alive(sshd) or processes.pid_namespace(sshd.pid) != namespace:
        return
    if namespace == processes.pid_namespace(os.getpid()):
        return  # never this machine's own processes (a node always has a namespace of its own)
    members = processes.in_namespace(namespace)
    for pid in sorted(members, key=lambda p: p != sshd.pid):  # its sshd first: no new session starts
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def hang(state: State, sys_root: Path) -> None:
    _signal_node(sys_root.parent, signal.SIGSTOP)


def unhang(state: State, sys_root: Path) -> None:
    _signal_node(sys_root.parent, signal.SIGCONT)


def _nothing(state: State, sys_root: Path) -> None:
    """Nothing to set: the fault's name in ``state["faults"]`` is the condition (answers)."""


FAULTS = {HUNG: (hang, unhang), GRACEFUL_IGNORED: (_nothing, _nothing)}
