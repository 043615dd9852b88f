"""A flapping RoCE link (the nic-link-flap fault): down and back up every FLAP_PERIOD_S, as a bad
cable or a dirty transceiver does, counted lazily at each read like the PDU's power-cap waves.

The fault stores ``nic["flap"] = {"since": <inject time>, "done": <flaps counted>}``; the first
flap is the inject itself, the k-th one ``since + (k - 1) * FLAP_PERIOD_S``. :func:`advance` (called
by every read of the port's counters, sim/roce_traffic.read) counts the flaps due by now where Linux
and mlx5 count them (``carrier_down_count`` and ``carrier_up_count`` in sysfs, ``link_down_events_phy``
in ``ethtool -S``) and logs mlx5_core's "Link down"/"Link up" lines. The link reads up: the few
milliseconds it is down in each flap are not modelled. Clearing the fault stops the flapping; the
counts stay, as a real port's do.

The nic-link-flap-once fault is a port that retrains once as its fabric comes up, then holds (a
ConnectX-8 on a fabric still settling, leptonai/gpud#1247): armed at the inject, its one flap is
counted at the first read of its counters that finds the node's GPUs loaded (at least ONCE_LOAD:
traffic crossing the link), and none after. In a gate that read is the burn-in's first under load
(the settling reading), or the all-reduce's last when the all-reduce runs.

Stdlib only: the fake tools run this inside the nodes.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from gpufleet_sim import kernel_log, roce_traffic, sysfs_rdma
from gpufleet_sim.state import State

# Any watch window of 5 s or more sees at least one flap.
FLAP_PERIOD_S = 4.0
# At most this many flaps' log lines per read (a real ring buffer would drop the oldest too).
MAX_LOGGED_FLAPS = 10
# The node's mean GPU utilisation (0..1) at which a port armed to flap once retrains: the load's
# traffic crossing it.
ONCE_LOAD = 0.5


def start(state: State, sys_root: Path, nic: dict[str, Any], now: float) -> None:
    """The port starts flapping at ``now``: its first flap counted now."""
    nic["flap"] = {"since": now, "done": 0}
    advance(state, sys_root, nic, now)


def arm_once(nic: dict[str, Any]) -> None:
    """The port will flap once, at the first read of its counters under load (ONCE_LOAD)."""
    nic["flap"] = {"since": None, "done": 0, "once": True}


def stop_all(state: State, sys_root: Path, now: float) -> None:
    """Every flapping (or armed) port of the node stops at ``now``."""
    for nic in state["nics"]:
        if nic.get("flap"):
            stop(state, sys_root, nic, now)


def stop(state: State, sys_root: Path, nic: dict[str, Any], now: float) -> None:
    """The flapping stops at ``now`` (the flaps until then counted)."""
    advance(state, sys_root, nic, now)
    nic.pop("flap", None)


def due(flap: dict[str, Any], now: float) -> int:
    """How many flaps a port flapping since ``flap["since"]`` has had by ``now`` (one at most for a
    port that flaps once; none before an armed one's flap)."""
    if flap.get("since") is None:
        return 0
    elapsed = now - float(flap["since"])
    count = 0 if elapsed < 0 else 1 + math.floor(elapsed / FLAP_PERIOD_S)
    return min(count, 1) if flap.get("once") else count


def advance(state: State, sys_root: Path, nic: dict[str, Any], now: float) -> int:
    """Counts the flaps due since the last read (in ``state`` and sysfs); returns how many."""
    flap = nic.get("flap")
    if not flap:
        return 0
    if flap.get("once") and flap.get("since") is None:
        if roce_traffic.load_fraction(state, now) < ONCE_LOAD:
            return 0
        # traffic crosses the link for the first time: it retrains now
        flap["since"] = now
    new = due(flap, now) - int(flap["done"])
    if new <= 0:
        return 0
    first = int(flap["done"])
    flap["done"] = first + new
    nic["carrier_down_count"] = int(nic.get("carrier_down_count", 0)) + new
    nic["carrier_up_count"] = int(nic.get("carrier_up_count", 0)) + new
    values = nic.setdefault("roce_counters", {"values": {}}).setdefault("values", {})
    values["link_down_events_phy"] = values.get("link_down_events_phy", 0) + new
    # rewrites the carrier counts and the (up) link's files
    sysfs_rdma.set_link(state, nic, sys_root, bool(nic.get("link_up", True)))
    for k in range(max(first, flap["done"] - MAX_LOGGED_FLAPS), flap["done"]):
        at = float(flap["since"]) + k * FLAP_PERIOD_S
        kernel_log.append(
            state, at, [*kernel_log.link_change(nic, False), *kernel_log.link_change(nic, True)]
        )
    return new
