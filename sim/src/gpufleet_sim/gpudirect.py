"""What GPUDirect RDMA needs on a simulated node, and the services the GPUs need: the nvidia_peermem
module (sysfs ``module/nvidia_peermem/initstate``), the PCIe switches' ACS control (what the fake
``lspci -vvv`` prints, sim/tools/lspci.py) and the NVIDIA units in the node's systemd state.

State: each PCI switch's ``acs`` (absent: ACS off on its ports, as a tuned HGX node has it; a list of
the ACSCtl bits that are on), ``kernel_modules`` (the modules loaded; nvidia_peermem unless a fault
unloaded it). lspci's lines follow a real capture (tests/fixtures/real/pcie/, INDEX.md §13):
``\\tCapabilities: [2a0 v1] Access Control Services``, ``\\t\\tACSCap:\\tSrcValid+ ...``,
``\\t\\tACSCtl:\\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-``.
Stdlib only: the fake lspci runs it on the node.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpufleet_sim.state import State, sysfs_bdf

PEERMEM = "nvidia_peermem"
ACS_BITS = ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl", "DirectTrans")
# What Linux turns on at a port that supports it (pci_std_enable_acs): the bits of the real capture.
KERNEL_ACS = ("SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd")
# A switch port's capability: everything but egress control (the real capture's ACSCap).
ACS_CAP = ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "DirectTrans")
# The units an HGX node with DCGM runs beside the persistence daemon, active from boot.
NVIDIA_UNITS = ("nvidia-fabricmanager.service", "nvidia-dcgm.service")


# Their unit files (NVIDIA's names and types; the simulated daemons do nothing): the node's systemd starts
# them at boot (sim/tools/systemctl.py __boot), a stop marks them inactive.
UNIT_FILES = {
    "nvidia-fabricmanager.service": "[Unit]\nDescription=NVIDIA fabric manager service\n\n"
    "[Service]\nType=forking\nExecStart=/bin/true\n\n[Install]\nWantedBy=multi-user.target\n",
    "nvidia-dcgm.service": "[Unit]\nDescription=NVIDIA DCGM service\n\n"
    "[Service]\nType=forking\nExecStart=/bin/true\n\n[Install]\nWantedBy=multi-user.target\n",
}


def initial_units() -> dict[str, dict[str, Any]]:
    return {name: {"enabled": True, "active": True} for name in NVIDIA_UNITS}


def write_units(units_dir: Path) -> None:
    for name, text in UNIT_FILES.items():
        (units_dir / name).write_text(text, encoding="utf-8")


def module_dir(sys_root: Path, name: str) -> Path:
    return sys_root / "module" / name


def render_modules(sys_root: Path, state: State) -> None:
    """/sys/module/<name>/initstate ``live`` for each loaded module (nvidia_peermem by default)."""
    for name in state.setdefault("kernel_modules", [PEERMEM]):
        path = module_dir(sys_root, name) / "initstate"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("live\n", encoding="utf-8")


def unload(sys_root: Path, state: State, name: str) -> None:
    modules = state.setdefault("kernel_modules", [PEERMEM])
    if name in modules:
        modules.remove(name)
    target = module_dir(sys_root, name)
    for child in sorted(target.glob("*"), reverse=True):
        child.unlink()
    if target.exists():
        target.rmdir()


def load(sys_root: Path, state: State, name: str) -> None:
    modules = state.setdefault("kernel_modules", [PEERMEM])
    if name not in modules:
        modules.append(name)
    render_modules(sys_root, state)


def _flags(on: tuple[str, ...] | list[str]) -> str:
    return " ".join(f"{bit}{'+' if bit in on else '-'}" for bit in ACS_BITS)


def _bridge(bdf: str, port: str, acs_on: list[str] | tuple[str, ...], vendor: str) -> list[str]:
    return [
        f"{bdf} PCI bridge: {vendor} (prog-if 00 [Normal decode])",
        "\tControl: I/O+ Mem+ BusMaster+ SpecCycle- MemWINV- VGASnoop- ParErr- Stepping- SERR+ FastB2B- "
        "DisINTx+",
        f"\tCapabilities: [68] Express (v2) {port}, MSI 00",
        "\tCapabilities: [2a0 v1] Access Control Services",
        f"\t\tACSCap:\t{_flags(ACS_CAP)}",
        f"\t\tACSCtl:\t{_flags(acs_on)}",
        "\tKernel driver in use: pcieport",
        "",
    ]


def lspci_vvv(state: State) -> str:
    """``lspci -D -vvv`` of the node's PCI tree: per switch its root port (ACS on, as the kernel sets
    it), its upstream port and downstream ports (ACS as ``switch["acs"]`` says, off by default), then
    the GPUs and NICs below it."""
    lines: list[str] = []
    for switch in state["pci_switches"]:
        vendor = "Broadcom / LSI PCIe Switch management endpoint"
        lines += _bridge(
            str(switch["root_port"]), "Root Port (Slot+)", KERNEL_ACS, "Intel Corporation Device 352a"
        )
        acs = list(switch.get("acs") or [])
        lines += _bridge(str(switch["upstream"]), "Upstream Port", acs, vendor)
        for position in range(len(switch["children"])):
            port = f"0000:{switch['downstream_bus']:02x}:{position:02x}.0"
            lines += _bridge(port, "Downstream Port (Slot+)", acs, vendor)
    for gpu in state["gpus"]:
        if gpu.get("present", True):
            device = str(gpu["pci_device_id"]).lower()[2:6]  # 0x318210de: device id, then vendor id
            lines += [
                f"{sysfs_bdf(str(gpu['pci_bus_id']))} 3D controller: NVIDIA Corporation Device {device}",
                "",
            ]
    for nic in state["nics"]:
        device = str(nic["pci_device_id"]).lower().removeprefix("0x")
        lines += [f"{nic['pci_bus_id']} Ethernet controller: Mellanox Technologies Device {device}", ""]
    return "\n".join(lines) + ("\n" if lines else "")
