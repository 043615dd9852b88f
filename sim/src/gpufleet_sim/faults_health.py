"""Hardware-health faults a maintenance window leaves behind (issue 25): each on one GPU or port.

GPU numbers are nvidia-smi indices (bus order) of the GPUs present when the fault is injected (the
last GPU when the node has fewer); the GPU hit is remembered by UUID, so the clear undoes exactly
what the inject did (``state["fault_saved"][<fault>]``). Each shows on the next read of the tool
that reports it, serving or not (the fake tools read the state on every call).

What a reboot does (sim/boot.py): the kernel log starts again (the Xid lines are gone), volatile
ECC counts reset, a pending row remap is applied; a degraded link, a dead NVLink, a GPU off the bus,
flashed firmware and a flapping port stay.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from gpufleet_sim import (
    faults_gpu,
    faults_gpudirect,
    faults_nvswitch,
    faults_rdma,
    gpu_reset,
    kernel_log,
    link_flap,
    node_power,
    sysfs,
    sysfs_rdma,
)
from gpufleet_sim.state import State, pop_fault_record, present_gpus, save_fault_record, sysfs_bdf

Gpu = dict[str, Any]

PCIE_DEGRADED_GPU = 3
PCIE_DEGRADED_WIDTH = 8
PCIE_DEGRADED_GEN = 1
NVLINK_DOWN_GPU, NVLINK_DOWN_LINK = 5, 7
ROW_REMAP_GPU = 2
ECC_GPU, ECC_UNCORRECTABLE = 1, 2
XID_79_GPU = 6
XID_94_GPU = 4
RECOVERY_ACTION_GPU, RECOVERY_ACTION = 7, "Node Reboot"
PCIE_REPLAYS_GPU, PCIE_REPLAYS_PER_S = 0, 5.0
NIC_SYMBOL_ERRORS_PER_S = 5.0


def _gpu(state: State, index: int) -> Gpu:
    gpus = present_gpus(state)
    return gpus[min(index, len(gpus) - 1)]


def _by_uuid(state: State, uuid: str) -> Gpu:
    gpu: Gpu = next(g for g in state["gpus"] if g["uuid"] == uuid)
    return gpu


def _write_link_width(sys_root: Path, state: State, gpu: Gpu, width: int) -> None:
    devdir = sysfs.endpoint_dir(sys_root, state, sysfs_bdf(str(gpu["pci_bus_id"])))
    if devdir.is_dir():
        (devdir / "current_link_width").write_text(f"{width}\n", encoding="utf-8")


# -- pcie-degraded: GPU 3 trained at x8 of x16 and stuck at Gen1 under load (a GPU or riser not fully
# seated). nvidia-smi -q/-q -x/--query-gpu and sysfs current_link_width show it.
def pcie_degraded(state: State, sys_root: Path) -> None:
    gpu = _gpu(state, PCIE_DEGRADED_GPU)
    pcie = gpu["pcie"]
    save_fault_record(state, "pcie-degraded", {"uuid": gpu["uuid"]})
    pcie["width_current"] = PCIE_DEGRADED_WIDTH
    pcie["gen_limit"] = PCIE_DEGRADED_GEN
    _write_link_width(sys_root, state, gpu, PCIE_DEGRADED_WIDTH)


def pcie_degraded_clear(state: State, sys_root: Path) -> None:
    record = pop_fault_record(state, "pcie-degraded")
    if record is None:
        return
    gpu = _by_uuid(state, record["uuid"])
    gpu["pcie"].pop("width_current", None)
    gpu["pcie"].pop("gen_limit", None)
    _write_link_width(sys_root, state, gpu, int(gpu["pcie"]["width"]))


# -- nvlink-down: GPU 5's NVLink link 7 inactive (nvidia-smi nvlink -s prints <inactive>).
def nvlink_down(state: State, sys_root: Path) -> None:
    gpu = _gpu(state, NVLINK_DOWN_GPU)
    save_fault_record(state, "nvlink-down", {"uuid": gpu["uuid"]})
    inactive = gpu.setdefault("nvlink", {"inactive": [], "errors": {}}).setdefault("inactive", [])
    if NVLINK_DOWN_LINK not in inactive:
        inactive.append(NVLINK_DOWN_LINK)


def nvlink_down_clear(state: State, sys_root: Path) -> None:
    record = pop_fault_record(state, "nvlink-down")
    if record is None:
        return
    nvlink = _by_uuid(state, record["uuid"]).get("nvlink", {})
    nvlink["inactive"] = [n for n in nvlink.get("inactive", []) if n != NVLINK_DOWN_LINK]


# -- row-remap-pending: GPU 2 has a row marked for remapping, applied at its next reset
# (-q -x remapped_row_pending Yes; --query-gpu remapped_rows.pending Yes).
def row_remap_pending(state: State, sys_root: Path) -> None:
    gpu = _gpu(state, ROW_REMAP_GPU)
    save_fault_record(
        state, "row-remap-pending", {"uuid": gpu["uuid"], "remapped_rows": dict(gpu["remapped_rows"])}
    )
    gpu["remapped_rows"]["pending"] = True


def row_remap_pending_clear(state: State, sys_root: Path) -> None:
    record = pop_fault_record(state, "row-remap-pending")
    if record is not None:
        _by_uuid(state, record["uuid"])["remapped_rows"] = record["remapped_rows"]


# -- row-remap-pending-persistent: GPU 2's pending remap is one its hardware cannot carry out: pending again
# after every GPU reset and every reboot, nothing remapped (gpu_reset.stays_pending); only replacing the GPU
# (clearing the fault) ends it.
def row_remap_pending_persistent(state: State, sys_root: Path) -> None:
    gpu = _gpu(state, ROW_REMAP_GPU)
    record = {"uuid": gpu["uuid"], "remapped_rows": dict(gpu["remapped_rows"])}
    save_fault_record(state, gpu_reset.PERSISTENT_REMAP, record)
    gpu["remapped_rows"]["pending"] = True


def row_remap_pending_persistent_clear(state: State, sys_root: Path) -> None:
    record = pop_fault_record(state, gpu_reset.PERSISTENT_REMAP)
    if record is not None:
        _by_uuid(state, record["uuid"])["remapped_rows"] = record["remapped_rows"]


# -- ecc-uncorrectable: GPU 1 counted 2 uncorrectable DRAM ECC errors since the driver loaded, and as
# many over its life (-q -x ecc_errors volatile/aggregate dram_uncorrectable 2).
def _save_ecc(state: State, fault: str, gpu: Gpu) -> None:
    save_fault_record(state, fault, {"uuid": gpu["uuid"], "ecc": dict(gpu["ecc"])})


def _restore_ecc(state: State, fault: str) -> Gpu | None:
    record = pop_fault_record(state, fault)
    if record is None:
        return None
    gpu = _by_uuid(state, record["uuid"])
    gpu["ecc"] = record["ecc"]
    return gpu


def ecc_uncorrectable(state: State, sys_root: Path) -> None:
    gpu = _gpu(state, ECC_GPU)
    _save_ecc(state, "ecc-uncorrectable", gpu)
    gpu["ecc"]["volatile_uncorrected"] = int(gpu["ecc"]["volatile_uncorrected"]) + ECC_UNCORRECTABLE
    gpu["ecc"]["aggregate_uncorrected"] = int(gpu["ecc"]["aggregate_uncorrected"]) + ECC_UNCORRECTABLE


def ecc_uncorrectable_clear(state: State, sys_root: Path) -> None:
    _restore_ecc(state, "ecc-uncorrectable")


# -- xid-79: GPU 6 fell off the bus: gone from nvidia-smi and sysfs (as gpu-missing), and the driver's
# Xid 79 lines, naming its PCI bus id, in the kernel log (dmesg).
def xid_79(state: State, sys_root: Path) -> None:
    gpu = _gpu(state, XID_79_GPU)
    save_fault_record(state, "xid-79", {"uuid": gpu["uuid"]})
    kernel_log.append(state, time.time(), kernel_log.xid_79(gpu))
    faults_gpu.take_off_bus(state, sys_root, gpu)


def xid_79_clear(state: State, sys_root: Path) -> None:
    record = pop_fault_record(state, "xid-79")
    if record is not None:
        faults_gpu.put_on_bus(state, sys_root, _by_uuid(state, record["uuid"]))


# -- xid-94: GPU 4 hit a contained uncorrectable ECC error: an Xid 94 line in the kernel log, the GPU
# still present, its volatile (and aggregate) uncorrectable DRAM count 1.
def xid_94(state: State, sys_root: Path) -> None:
    gpu = _gpu(state, XID_94_GPU)
    _save_ecc(state, "xid-94", gpu)
    kernel_log.append(state, time.time(), kernel_log.xid_94(gpu))
    gpu["ecc"]["volatile_uncorrected"] = int(gpu["ecc"]["volatile_uncorrected"]) + 1
    gpu["ecc"]["aggregate_uncorrected"] = int(gpu["ecc"]["aggregate_uncorrected"]) + 1


def xid_94_clear(state: State, sys_root: Path) -> None:
    """The counts go back; the log line stays (a kernel log is history: a reboot clears it)."""
    _restore_ecc(state, "xid-94")


# -- recovery-action-reboot: GPU 7's driver asks for a node reboot after an uncorrectable fault
# (-q -x gpu_recovery_action, -q "GPU Recovery Action", --query-gpu gpu_recovery_action: Node Reboot),
# nothing in the kernel log (it wrapped, or the node served for weeks). A reboot takes the action.
def recovery_action_reboot(state: State, sys_root: Path) -> None:
    gpu = _gpu(state, RECOVERY_ACTION_GPU)
    record = {"uuid": gpu["uuid"], "recovery_action": gpu.get("recovery_action")}
    save_fault_record(state, "recovery-action-reboot", record)
    gpu["recovery_action"] = RECOVERY_ACTION


def recovery_action_reboot_clear(state: State, sys_root: Path) -> None:
    record = pop_fault_record(state, "recovery-action-reboot")
    if record is None:
        return
    gpu = _by_uuid(state, record["uuid"])
    gpu.pop("recovery_action", None)
    if record["recovery_action"]:
        gpu["recovery_action"] = record["recovery_action"]


# -- pcie-replays: GPU 0's PCIe link resends corrupted packets, 5 a second (300 a minute, DCGM warns
# above 8) from the inject while the fault holds (-q -x replay_counter, -q "Replays Since Reset"): one
# reading passes, the rise over the burn-in or a watch window does not. A marginal link (a riser not
# fully seated): a reboot restarts the count, the replays go on.
def pcie_replays(state: State, sys_root: Path) -> None:
    gpu = _gpu(state, PCIE_REPLAYS_GPU)
    save_fault_record(state, "pcie-replays", {"uuid": gpu["uuid"]})
    gpu["pcie"]["replays"] = {"t": time.time(), "per_s": PCIE_REPLAYS_PER_S}


def pcie_replays_clear(state: State, sys_root: Path) -> None:
    record = pop_fault_record(state, "pcie-replays")
    if record is not None:
        _by_uuid(state, record["uuid"])["pcie"].pop("replays", None)


# -- nic-link-flap: the last RoCE port (the highest slot, as link-down) flaps while the fault holds:
# down and back up at the inject and every link_flap.FLAP_PERIOD_S after, counted at each read of its
# counters (link_down_events_phy in ethtool -S, carrier_down_count/carrier_up_count in sysfs, mlx5_core's
# "Link down"/"Link up" lines); the link reads up. The clear stops it; the counts stay, as on a real port.
def nic_link_flap(state: State, sys_root: Path) -> None:
    link_flap.start(state, sys_root, faults_rdma.last_nic(state), time.time())


def nic_link_flap_clear(state: State, sys_root: Path) -> None:
    for nic in state["nics"]:
        if nic.get("flap"):
            link_flap.stop(state, sys_root, nic, time.time())


# -- nic-link-flap-once: the last RoCE port (as link-down and nic-link-flap) retrains once when the load's
# traffic first crosses it after the inject, then holds (link_flap.arm_once): one count in
# link_down_events_phy, carrier_down_count and the kernel log. The clear disarms it; a count stays.
def nic_link_flap_once(state: State, sys_root: Path) -> None:
    link_flap.arm_once(faults_rdma.last_nic(state))


def nic_link_flap_once_clear(state: State, sys_root: Path) -> None:
    link_flap.stop_all(state, sys_root, time.time())


# -- nic-symbol-errors: the first RoCE port (the lowest slot, mlx5_0) corrupts symbols while the fault
# holds, as a dirty fibre or a failing transceiver does: rx_symbol_err_phy (ethtool -S) and sysfs
# counters/symbol_error rise NIC_SYMBOL_ERRORS_PER_S a second, idle or loaded, counted at each read of its
# counters (sim/roce_traffic.py). The clear stops the rise; the counts stay, as on a real port.
def nic_symbol_errors(state: State, sys_root: Path) -> None:
    nic = min(state["nics"], key=lambda n: int(n["slot"]))
    save_fault_record(state, "nic-symbol-errors", {"ibdev": nic["ibdev"]})
    nic["phy_errors"] = {"per_s": NIC_SYMBOL_ERRORS_PER_S}


def nic_symbol_errors_clear(state: State, sys_root: Path) -> None:
    record = pop_fault_record(state, "nic-symbol-errors")
    for nic in state["nics"]:
        if record is not None and nic["ibdev"] == record["ibdev"]:
            nic.pop("phy_errors", None)


# -- nccl-slow: NCCL's all-reduce runs at a quarter of its healthy bus bandwidth and nothing else on the
# node looks wrong (as ACS left on in the PCIe switches, or a bad NCCL setting, does): only
# all_reduce_perf shows it (sim/nccl_model.py reads the fault from the state's fault list).
def nccl_slow(state: State, sys_root: Path) -> None:
    """Nothing to set: the fault's name in ``state["faults"]`` is the condition."""


# -- dcgm-diag-fail: GPU 2 fails DCGM's memory test (dcgmi diag -r 2 and above) with faulty memory
# elements that no other reading shows (sim/dcgm_diag.py reads the fault from the fault list).
def dcgm_diag_fail(state: State, sys_root: Path) -> None:
    """Nothing to set: the fault's name in ``state["faults"]`` is the condition."""


# -- firmware-mismatch: every GPU of the node reports a different VBIOS and every NIC a different
# firmware than its profile's (-q -x vbios_version, --query-gpu vbios_version; sysfs fw_ver,
# mlxlink, ibdev2netdev -v, the kernel log's mlx5_core line).
def previous_version(version: str) -> str:
    """A different (older-looking) version of the same line: the last field one lower, in its base and
    width (97.10.4A.00.02 -> 97.10.4A.00.01, 28.39.3560 -> 28.39.3559; a 0 becomes 1)."""
    head, _, last = version.rpartition(".")
    base = 16 if any(ch in "ABCDEFabcdef" for ch in version) else 10
    number = int(last, base)
    number = number - 1 if number > 0 else 1
    text = f"{number:0{len(last)}X}" if base == 16 else f"{number:0{len(last)}d}"
    return f"{head}.{text}" if head else text


def firmware_mismatch(state: State, sys_root: Path) -> None:
    save_fault_record(
        state,
        "firmware-mismatch",
        {
            "vbios": {g["uuid"]: g["vbios_version"] for g in state["gpus"]},
            "nic_fw": {n["ibdev"]: n["fw_version"] for n in state["nics"]},
        },
    )
    for gpu in state["gpus"]:
        gpu["vbios_version"] = previous_version(str(gpu["vbios_version"]))
    for nic in state["nics"]:
        _set_nic_fw(sys_root, nic, previous_version(str(nic["fw_version"])))


def firmware_mismatch_clear(state: State, sys_root: Path) -> None:
    record = pop_fault_record(state, "firmware-mismatch")
    if record is None:
        return
    for gpu in state["gpus"]:
        gpu["vbios_version"] = record["vbios"].get(gpu["uuid"], gpu["vbios_version"])
    for nic in state["nics"]:
        _set_nic_fw(sys_root, nic, record["nic_fw"].get(nic["ibdev"], nic["fw_version"]))


def _set_nic_fw(sys_root: Path, nic: dict[str, Any], version: str) -> None:
    nic["fw_version"] = version
    ib = sysfs_rdma.ibdev_dir(sys_root, nic)
    if ib.exists():
        (ib / "fw_ver").write_text(f"{version}\n", encoding="utf-8")


FAULTS = {
    "pcie-degraded": (pcie_degraded, pcie_degraded_clear),
    "nvlink-down": (nvlink_down, nvlink_down_clear),
    "row-remap-pending": (row_remap_pending, row_remap_pending_clear),
    gpu_reset.PERSISTENT_REMAP: (row_remap_pending_persistent, row_remap_pending_persistent_clear),
    "ecc-uncorrectable": (ecc_uncorrectable, ecc_uncorrectable_clear),
    "xid-79": (xid_79, xid_79_clear),
    "xid-94": (xid_94, xid_94_clear),
    "recovery-action-reboot": (recovery_action_reboot, recovery_action_reboot_clear),
    "pcie-replays": (pcie_replays, pcie_replays_clear),
    "nic-link-flap": (nic_link_flap, nic_link_flap_clear),
    "nic-link-flap-once": (nic_link_flap_once, nic_link_flap_once_clear),
    "nic-symbol-errors": (nic_symbol_errors, nic_symbol_errors_clear),
    "firmware-mismatch": (firmware_mismatch, firmware_mismatch_clear),
    "nccl-slow": (nccl_slow, nccl_slow),
    "dcgm-diag-fail": (dcgm_diag_fail, dcgm_diag_fail),
    # GPUDirect RDMA's host pieces, the NVIDIA services, an mlx5 firmware error (issue 38)
    **faults_gpudirect.FAULTS,
    # a host that hangs: its BMC's graceful resets go unanswered (issue 39)
    **node_power.FAULTS,
    # the NVSwitch fabric: an NVLink link's CRC errors, Fabric Manager down on a baseboard, an SXid
    **faults_nvswitch.FAULTS,
}
