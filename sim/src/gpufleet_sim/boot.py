"""What a reboot does to a simulated node: settings that live only in the driver or the
kernel are lost (and its kernel log and volatile ECC counts start again), pending firmware settings
and row remaps take effect, and physical faults stay."""

from __future__ import annotations

import time
from pathlib import Path

from gpufleet_sim import faults, gpu_reset, kernel_log, node_power, sysfs_rdma, thermal
from gpufleet_sim.state import State

# What the driver and kernel come up with, before any boot unit runs.
BOOT_TRUST = "pcp"
BOOT_ROCE_MODE = "IB/RoCE v1"
BOOT_TOS = 0
BOOT_MTU = 1500
BOOT_TCLASS = 0


def _write(path: Path, value: object) -> None:
    path.write_text(f"{value}\n", encoding="utf-8")


def power_cycle(state: State, sys_root: Path) -> None:
    # Every process went down with the host: no load, no GPU memory held, no service running.
    now = time.time()
    thermal.clear_load(state, now)
    # A new kernel log (the Xid lines of the last boot are gone).
    kernel_log.boot(state, now)
    for unit in state.get("units", {}).values():
        for key in ("pid", "pid_start", "stopping", "sub"):
            unit.pop(key, None)
    for gpu in state["gpus"]:
        gpu["memory_used_mib"] = 0
        gpu["persistence_mode"] = False
        # A reboot resets every GPU (gpu_reset.apply: a pending row remap applied, volatile ECC counts,
        # the power limit, the clocks and the replay count start again) and takes whatever recovery action
        # the driver asked for, a node reboot included.
        gpu_reset.apply(gpu, now)
        gpu.pop("recovery_action", None)
    for nic in state["nics"]:
        if nic.get("pending_link_type"):
            nic["link_type"], nic["pending_link_type"] = nic["pending_link_type"], None
        nic["trust"] = BOOT_TRUST
        nic["pfc"] = [0] * 8
        sysfs_rdma.write_ecn(sys_root, nic, [0] * 8, [0] * 8)
        sysfs_rdma.write_roce_mode(sys_root, nic, BOOT_ROCE_MODE)
        _write(sysfs_rdma.configfs_port_dir(sys_root, nic) / "default_roce_tos", BOOT_TOS)
        _write(sysfs_rdma.netdev_dir(sys_root, nic) / "mtu", BOOT_MTU)
        _write(sysfs_rdma.ibdev_dir(sys_root, nic) / "tc" / str(nic["port"]) / "traffic_class", "")
    gpu_reset.stays_pending(state, {str(gpu["uuid"]) for gpu in state["gpus"]})
    # A GPU that fell off the bus (Xid 79) is back on it: the reboot is what clears it (the fault is gone).
    for name in CLEARED_BY_REBOOT:
        if name in state["faults"]:
            faults.FAULTS[name][1](state, sys_root)
            state["faults"].remove(name)
    # A PDU still caps, a cable is still pulled, a GPU is still off the bus, a valve still half shut.
    for name in state["faults"]:
        if name in PERSISTENT_FAULTS:
            faults.FAULTS[name][0](state, sys_root)


# Faults a reboot ends: the GPU that fell off the bus is found again when the node comes up (a GPU
# missing for good is gpu-missing, which stays), and a shutdown stuck on its driver is over.
CLEARED_BY_REBOOT = ("xid-79", node_power.GRACEFUL_IGNORED)
PERSISTENT_FAULTS = ("power-capped", "link-down", "gpu-missing", "hot-gpu", "low-coolant-flow")
