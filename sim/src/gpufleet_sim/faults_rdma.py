"""RDMA faults: what breaks a lossless RoCE fabric on a real node, applied to state and sysfs.

Each clear puts back the tuned baseline (sysfs_rdma), which is what the roles configure.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from gpufleet_sim import roce_traffic, sysfs_rdma
from gpufleet_sim.state import State

TUNED_PFC = [1 if prio == sysfs_rdma.ROCE_PRIORITY else 0 for prio in range(8)]


def pfc_off(state: State, sys_root: Path) -> None:
    for nic in state["nics"]:
        nic["pfc"] = [0] * 8


def pfc_on(state: State, sys_root: Path) -> None:
    for nic in state["nics"]:
        nic["pfc"] = list(TUNED_PFC)


def ecn_off(state: State, sys_root: Path) -> None:
    for nic in state["nics"]:
        sysfs_rdma.write_ecn(sys_root, nic, [0] * 8, [0] * 8)


def ecn_on(state: State, sys_root: Path) -> None:
    for nic in state["nics"]:
        sysfs_rdma.write_ecn(sys_root, nic, list(TUNED_PFC), list(TUNED_PFC))


def roce_v1(state: State, sys_root: Path) -> None:
    for nic in state["nics"]:
        sysfs_rdma.write_roce_mode(sys_root, nic, sysfs_rdma.ROCE_V1)


def roce_v2(state: State, sys_root: Path) -> None:
    for nic in state["nics"]:
        sysfs_rdma.write_roce_mode(sys_root, nic, sysfs_rdma.ROCE_V2)


def last_nic(state: State) -> dict[str, Any]:
    # The highest slot (mlx5_7 on b300-16): a single cross-board link, as a pulled cable takes down.
    nic: dict[str, Any] = max(state["nics"], key=lambda n: int(n["slot"]))
    return nic


def set_port_link(
    state: State, sys_root: Path, nic: dict[str, Any], up: bool, now: float | None = None
) -> None:
    """One NIC's link up or down at ``now``; its counters up to then moved at the old link's rates
    (they advance lazily, when read)."""
    roce_traffic.advance(sys_root.parent, state, nic, time.time() if now is None else now)
    sysfs_rdma.set_link(state, nic, sys_root, up=up)


def link_down(state: State, sys_root: Path) -> None:
    set_port_link(state, sys_root, last_nic(state), up=False)


def link_up(state: State, sys_root: Path) -> None:
    set_port_link(state, sys_root, last_nic(state), up=True)


FAULTS = {
    "pfc-off": (pfc_off, pfc_on),
    "ecn-off": (ecn_off, ecn_on),
    "roce-v1": (roce_v1, roce_v2),
    "link-down": (link_down, link_up),
}
