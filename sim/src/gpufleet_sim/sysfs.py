"""Renders a node's PCI tree into its fake sysfs, shaped as Linux lays it out.

/sys/devices/pci0000:XX/<root port>/<switch upstream>/<downstream>/<endpoint>, with
/sys/bus/pci/devices/<bdf> as relative symlinks, so tools that walk the parent chain
(NCCL, the nccl_topology role) see real-looking paths. NIC endpoints get their netdev and
RDMA files from sysfs_rdma.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from gpufleet_sim import sysfs_rdma
from gpufleet_sim.state import State, sysfs_bdf

_LINK_SPEED = {4: "16.0 GT/s PCIe", 5: "32.0 GT/s PCIe", 6: "64.0 GT/s PCIe"}
_CLASS_GPU = "0x030200"  # 3D controller: how SXM datacenter GPUs enumerate
_CLASS_NIC = "0x020000"
_CLASS_BRIDGE = "0x060400"


def _write(path: Path, value: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{value}\n", encoding="utf-8")


def _cpumask(cpulist: str) -> str:
    mask = 0
    for part in cpulist.split(","):
        lo, _, hi = part.partition("-")
        for cpu in range(int(lo), int(hi or lo) + 1):
            mask |= 1 << cpu
    text = f"{mask:x}"
    text = text.zfill((len(text) + 7) // 8 * 8)
    return ",".join(text[i : i + 8] for i in range(0, len(text), 8))


def _device_files(
    devdir: Path, state: State, numa: int, pci_class: str, vendor: str, device: str, gen: int
) -> None:
    cpulist = next(n["cpulist"] for n in state["numa_nodes"] if n["id"] == numa)
    files: dict[str, Any] = {
        "class": pci_class,
        "vendor": vendor,
        "device": device,
        "subsystem_vendor": vendor,
        "subsystem_device": "0x0000",
        "numa_node": numa,
        "local_cpulist": cpulist,
        "local_cpus": _cpumask(cpulist),
        "max_link_speed": _LINK_SPEED.get(gen, _LINK_SPEED[5]),
        "max_link_width": 16,
        "current_link_speed": _LINK_SPEED.get(gen, _LINK_SPEED[5]),
        "current_link_width": 16,
    }
    for name, value in files.items():
        _write(devdir / name, value)


def _bus_link(sys_root: Path, bdf: str, devdir: Path) -> None:
    link = sys_root / "bus" / "pci" / "devices" / bdf
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink():
        link.unlink()
    link.symlink_to(os.path.relpath(devdir, link.parent))


def _downstream_port(switch: dict[str, Any], position: int) -> str:
    return f"0000:{switch['downstream_bus']:02x}:{position:02x}.0"


def _switch_dir(sys_root: Path, switch: dict[str, Any]) -> Path:
    root_port, upstream = str(switch["root_port"]), str(switch["upstream"])
    return sys_root / "devices" / f"pci0000:{root_port.split(':')[1]}" / root_port / upstream


def endpoint_dir(sys_root: Path, state: State, bdf: str) -> Path:
    """Where the endpoint with this sysfs BDF sits in the tree."""
    for switch in state["pci_switches"]:
        if bdf in switch["children"]:
            position = switch["children"].index(bdf)
            return _switch_dir(sys_root, switch) / _downstream_port(switch, position) / bdf
    raise KeyError(f"{bdf} is behind no PCI switch of this node")


def render_gpu(sys_root: Path, state: State, gpu: dict[str, Any]) -> None:
    bdf = sysfs_bdf(gpu["pci_bus_id"])
    devdir = endpoint_dir(sys_root, state, bdf)
    ids = gpu["pci_device_id"].lower()  # 0x318210de: device id then vendor id
    _device_files(
        devdir, state, gpu["numa_node"], _CLASS_GPU, "0x" + ids[6:], "0x" + ids[2:6], gpu["pcie"]["gen"]
    )
    sub = gpu["pci_subsystem_id"].lower()
    _write(devdir / "subsystem_device", "0x" + sub[2:6])
    _bus_link(sys_root, bdf, devdir)


def remove_gpu(sys_root: Path, state: State, gpu: dict[str, Any]) -> None:
    """A GPU that fell off the bus: its device and bus entry disappear."""
    bdf = sysfs_bdf(gpu["pci_bus_id"])
    shutil.rmtree(endpoint_dir(sys_root, state, bdf), ignore_errors=True)
    link = sys_root / "bus" / "pci" / "devices" / bdf
    if link.is_symlink():
        link.unlink()


def _render_switches(sys_root: Path, state: State) -> None:
    for switch in state["pci_switches"]:
        updir = _switch_dir(sys_root, switch)
        rootdir = updir.parent
        numa = switch["numa_node"]
        _device_files(rootdir, state, numa, _CLASS_BRIDGE, "0x8086", "0x352a", 5)
        _bus_link(sys_root, switch["root_port"], rootdir)
        _device_files(updir, state, numa, _CLASS_BRIDGE, switch["vendor"], switch["device"], 5)
        _bus_link(sys_root, switch["upstream"], updir)
        for position in range(len(switch["children"])):
            port = _downstream_port(switch, position)
            portdir = updir / port
            _device_files(portdir, state, numa, _CLASS_BRIDGE, switch["vendor"], switch["device"], 5)
            _bus_link(sys_root, port, portdir)


def _render_numa(sys_root: Path, state: State) -> None:
    ids = [n["id"] for n in state["numa_nodes"]]
    _write(sys_root / "devices" / "system" / "node" / "online", f"{min(ids)}-{max(ids)}")
    for numa in state["numa_nodes"]:
        _write(sys_root / "devices" / "system" / "node" / f"node{numa['id']}" / "cpulist", numa["cpulist"])


def render(sys_root: Path, state: State) -> None:
    """The whole tree for a new node; live NIC settings are written once, here."""
    _render_numa(sys_root, state)
    _render_switches(sys_root, state)
    for gpu in state["gpus"]:
        if gpu.get("present", True):
            render_gpu(sys_root, state, gpu)
    for nic in state["nics"]:
        devdir = endpoint_dir(sys_root, state, nic["pci_bus_id"])
        ids = nic["pci_device_id"].lower()
        _device_files(devdir, state, nic["numa_node"], _CLASS_NIC, "0x15b3", ids, 5)
        _bus_link(sys_root, nic["pci_bus_id"], devdir)
        sysfs_rdma.render_nic(state, nic, devdir, sys_root)
