"""NVSwitch fabric faults (issue 38 item 2), registered in faults_health.FAULTS: each shows on the next
read of the tool that reports it, in the tool's real format.

- ``nvlink-crc-storm``: one GPU's NVLink link corrupts flits (a marginal link, connector or NVSwitch
  port): its ``CRC Errors`` in `nvidia-smi nvlink -e` rise from the inject, fastest under load
  (sim/tools/nvsmi_nvlink.py advances them at each read). One reading is clean; the rise over the
  burn-in's load or a watch window is not. The clear stops the rise; the counts stay (as on a real
  GPU until the driver reloads).
- ``fabric-manager-fault``: nvidia-fabricmanager died on one NVLink baseboard: every GPU of the first
  GPU's baseboard (its ``nvlink_domain``) reports its fabric registration ``In Progress`` with status
  ``N/A`` (-q -x ``<fabric>``, -q ``Fabric``, --query-gpu fabric.state/status) instead of Completed /
  Success. Simulated: what a GPU of a real HGX node prints while Fabric Manager has not (or no longer)
  set up its fabric was not captured; NVML's states are Not Started, In Progress and Completed.
- ``sxid``: a fatal NVSwitch SXid in the kernel log, in the lines of gpud's real capture
  (tests/fixtures/real/xid/gpud-sxid-readme-xid-79-quoted.txt): ``nvidia-nvswitch0: SXid
  (PCI:0000:05:00.0): 20034, Fatal, Link 62 LTSSM Fault Up``, its Severity and Data lines. The switch's
  bus id is the capture's (the simulated nodes have no NVSwitch PCI devices of their own). A reboot
  starts a new log (sim/boot.py); the clear leaves the lines, as a kernel log keeps its history.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from gpufleet_sim import kernel_log
from gpufleet_sim.state import State, pop_fault_record, present_gpus, save_fault_record

Gpu = dict[str, Any]

NVLINK_CRC_GPU, NVLINK_CRC_LINK = 9, 4
# CRC errors a second on the link: at idle a link still carries flits, under the burn-in's load many
# more. DCGM fails a GPU at 100 a second; either rate is far above it, so a 5 s watch window at idle
# (7500, above a minute's allowance of 6000) and an 11 s burn-in both see it.
NVLINK_CRC_IDLE_PER_S, NVLINK_CRC_LOAD_PER_S = 1500.0, 3500.0
FABRIC_FAULT_STATE, FABRIC_FAULT_STATUS = "In Progress", "N/A"
SXID_DEVICE, SXID_BUS, SXID, SXID_LINK = "nvidia-nvswitch0", "0000:05:00.0", 20034, 62


def _gpu(state: State, index: int) -> Gpu:
    gpus = present_gpus(state)
    gpu: Gpu = gpus[min(index, len(gpus) - 1)]
    return gpu


def _by_uuid(state: State, uuid: str) -> Gpu:
    gpu: Gpu = next(g for g in state["gpus"] if g["uuid"] == uuid)
    return gpu


def nvlink_crc_storm(state: State, sys_root: Path) -> None:
    gpu = _gpu(state, NVLINK_CRC_GPU)
    link = min(NVLINK_CRC_LINK, int(gpu["nvlink_count"]) - 1)
    save_fault_record(state, "nvlink-crc-storm", {"uuid": gpu["uuid"]})
    gpu.setdefault("nvlink", {"inactive": [], "errors": {}})["crc_storm"] = {
        "link": link,
        "t": time.time(),
        "count": 0.0,
        "idle_per_s": NVLINK_CRC_IDLE_PER_S,
        "load_per_s": NVLINK_CRC_LOAD_PER_S,
    }


def nvlink_crc_storm_clear(state: State, sys_root: Path) -> None:
    """The rise stops; the errors counted so far stay in the link's counters."""
    record = pop_fault_record(state, "nvlink-crc-storm")
    if record is None:
        return
    nvlink = _by_uuid(state, record["uuid"]).setdefault("nvlink", {"inactive": [], "errors": {}})
    storm = nvlink.pop("crc_storm", None)
    if storm:
        counts = nvlink.setdefault("errors", {}).setdefault(str(storm["link"]), {})
        counts["crc"] = int(counts.get("crc", 0)) + int(float(storm["count"]))


def fabric_manager_fault(state: State, sys_root: Path) -> None:
    board = _gpu(state, 0).get("nvlink_domain", 0)
    hit = [g for g in present_gpus(state) if g.get("nvlink_domain", 0) == board]
    save_fault_record(state, "fabric-manager-fault", {"uuids": [g["uuid"] for g in hit]})
    for gpu in hit:
        gpu["fabric"] = {"state": FABRIC_FAULT_STATE, "status": FABRIC_FAULT_STATUS}


def fabric_manager_fault_clear(state: State, sys_root: Path) -> None:
    record = pop_fault_record(state, "fabric-manager-fault")
    for uuid in (record or {}).get("uuids", []):
        _by_uuid(state, uuid).pop("fabric", None)


def sxid_lines(link: int = SXID_LINK) -> list[tuple[str, str]]:
    where = f"{SXID_DEVICE}: SXid (PCI:{SXID_BUS}): {SXID}"
    return [
        (kernel_log.ERR, f"{where}, Fatal, Link {link} LTSSM Fault Up"),
        (kernel_log.ERR, f"{where}, Severity 1 Engine instance {link} Sub-engine instance 00"),
        (
            kernel_log.ERR,
            f"{where}, Data {{0x10000000, 0x10000000, 0x00000000, 0x10000000, 0x00000000, 0x00000000, "
            "0x00000000, 0x00000000, 0x00000000}",
        ),
    ]


def sxid(state: State, sys_root: Path) -> None:
    kernel_log.append(state, time.time(), sxid_lines())


def sxid_clear(state: State, sys_root: Path) -> None:
    """Nothing to undo: the lines stay in the kernel log until a reboot."""


FAULTS = {
    "nvlink-crc-storm": (nvlink_crc_storm, nvlink_crc_storm_clear),
    "fabric-manager-fault": (fabric_manager_fault, fabric_manager_fault_clear),
    "sxid": (sxid, sxid_clear),
}
