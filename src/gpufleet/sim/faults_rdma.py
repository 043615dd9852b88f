"""RDMA faults: what breaks a lossless RoCE fabric on a real node, applied to state and sysfs.

Each clear puts back the tuned baseline (sysfs_rdma), which is what the roles configure.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpufleet.sim import sysfs_rdma
from gpufleet.sim.state import State

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


def _last_nic(state: State) -> dict[str, Any]:
    # The highest slot (mlx5_7 on b300-16): a single cross-board link, as a pulled cable takes down.
    nic: dict[str, Any] = max(state["nics"], key=lambda n: int(n["slot"]))
    return nic


def link_down(state: State, sys_root: Path) -> None:
    sysfs_rdma.set_link(state, _last_nic(state), sys_root, up=False)


def link_up(state: State, sys_root: Path) -> None:
    sysfs_rdma.set_link(state, _last_nic(state), sys_root, up=True)


FAULTS = {
    "pfc-off": (pfc_off, pfc_on),
    "ecn-off": (ecn_off, ecn_on),
    "roce-v1": (roce_v1, roce_v2),
    "link-down": (link_down, link_up),
}
