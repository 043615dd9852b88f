"""Faults of what GPUDirect RDMA and the GPUs' services need on a node (issue 38), and an mlx5
firmware error (sim/gpudirect.py holds the state they change):

- ``peermem-missing``: the nvidia_peermem module is not loaded (/sys/module/nvidia_peermem gone), as
  after a driver update that did not reload it or a node without it in /etc/modules-load.d;
- ``acs-enabled``: the first PCIe switch (its upstream and downstream ports, between GPUs and NICs)
  has ACS on as Linux sets it (SrcValid+ ReqRedir+ CmpltRedir+ UpstreamFwd+), as after a BIOS reset;
- ``service-down``: nvidia-fabricmanager.service failed (systemctl is-active: failed);
- ``mlx5-fw-error``: the second NIC (mlx5_1)'s firmware stops answering mlx5_core's health poller:
  the lines of a real capture (tests/fixtures/real/xid/qemu-devel-dmesg-mlx5-health-compromised-
  cx6dx.log) with the NIC's address and firmware. The clear leaves the lines in the kernel log (history:
  a reboot clears it), as the Xid faults' clears do.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from gpufleet_sim import gpudirect, kernel_log
from gpufleet_sim.state import State

SERVICE_DOWN_UNIT = "nvidia-fabricmanager.service"
MLX5_FW_ERROR_NIC = 1


def peermem_missing(state: State, sys_root: Path) -> None:
    gpudirect.unload(sys_root, state, gpudirect.PEERMEM)


def peermem_missing_clear(state: State, sys_root: Path) -> None:
    gpudirect.load(sys_root, state, gpudirect.PEERMEM)


def acs_enabled(state: State, sys_root: Path) -> None:
    state["pci_switches"][0]["acs"] = list(gpudirect.KERNEL_ACS)


def acs_enabled_clear(state: State, sys_root: Path) -> None:
    state["pci_switches"][0].pop("acs", None)


def service_down(state: State, sys_root: Path) -> None:
    unit: dict[str, Any] = state.setdefault("units", {}).setdefault(SERVICE_DOWN_UNIT, {"enabled": True})
    unit.update(active=False, result="failed")


def service_down_clear(state: State, sys_root: Path) -> None:
    unit: dict[str, Any] = state.setdefault("units", {}).setdefault(SERVICE_DOWN_UNIT, {"enabled": True})
    unit.update(active=True)
    unit.pop("result", None)


def mlx5_health_lines(bdf: str, fw_version: str) -> list[tuple[str, str]]:
    """mlx5_core's lines when the health poller finds the firmware gone (the real capture's, the
    assert registers left out)."""
    say = f"mlx5_core {bdf}: "
    return [
        (kernel_log.ERR, say + "poll_health:801:(pid 0): device's health compromised - reached miss count"),
        (
            kernel_log.ERR,
            say + "print_health_info:431:(pid 0): Health issue observed, firmware internal error, "
            "severity(3) ERROR:",
        ),
        (kernel_log.ERR, say + f"print_health_info:440:(pid 0): fw_ver {fw_version}"),
        (kernel_log.ERR, say + "print_health_info:445:(pid 0): severity 3 (ERROR)"),
        (kernel_log.ERR, say + "print_health_info:447:(pid 0): synd 0x1: firmware internal error"),
        (kernel_log.ERR, say + "print_health_info:449:(pid 0): ext_synd 0x8f7a"),
    ]


def mlx5_fw_error(state: State, sys_root: Path) -> None:
    nics = sorted(state["nics"], key=lambda n: int(n["slot"]))
    nic = nics[min(MLX5_FW_ERROR_NIC, len(nics) - 1)]
    kernel_log.append(state, time.time(), mlx5_health_lines(str(nic["pci_bus_id"]), str(nic["fw_version"])))


def mlx5_fw_error_clear(state: State, sys_root: Path) -> None:
    """Nothing to undo: the lines stay in the kernel log until a reboot."""


FAULTS = {
    "peermem-missing": (peermem_missing, peermem_missing_clear),
    "acs-enabled": (acs_enabled, acs_enabled_clear),
    "service-down": (service_down, service_down_clear),
    "mlx5-fw-error": (mlx5_fw_error, mlx5_fw_error_clear),
}
