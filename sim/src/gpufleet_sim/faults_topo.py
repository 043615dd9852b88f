"""Topology faults: an NCCL topology file left over from before a hardware change.

`stale-nccl-topo` writes /etc/nccl/topo.xml (the node's overlay upper dir, etc-upper/) as NCCL
would have dumped it before the last service: the last GPU then enumerated 16 buses higher,
the last NIC was not fitted yet, and the first NIC hung off the other socket. The file is in
NCCL's dump format (tests/fixtures/real/nccl-topo/ibm-cloud-h100-*.xml). Clearing it puts
back whatever file was there before (or removes it).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpufleet_sim.state import State, present_gpus, sysfs_bdf

TOPO_FILE = Path("nccl") / "topo.xml"
_SAVED = "stale-nccl-topo.saved"
_ABSENT = "stale-nccl-topo.absent"


def _etc(sys_root: Path) -> Path:
    return sys_root.parent / "etc-upper"


def _moved(bdf: str) -> str:
    domain, bus, rest = bdf.split(":")
    return f"{domain}:{int(bus, 16) + 0x10:02x}:{rest}"


def _pci(attrs: dict[str, str], body: list[str], pad: str) -> list[str]:
    text = " ".join(f'{k}="{v}"' for k, v in attrs.items())
    if not body:
        return [f"{pad}<pci {text}/>"]
    return [f"{pad}<pci {text}>", *body, f"{pad}</pci>"]


def _ids(busid: str, pci_class: str, vendor: str, device: str) -> dict[str, str]:
    return {
        "busid": busid,
        "class": pci_class,
        "vendor": vendor,
        "device": device,
        "subsystem_vendor": vendor,
        "subsystem_device": "0x0000",
        "link_speed": "32.0 GT/s PCIe",
        "link_width": "16",
    }


def _gpu_entry(gpu: dict[str, Any], index: int, busid: str) -> list[str]:
    ids = str(gpu["pci_device_id"]).lower()  # 0x318210de: device id then vendor id
    sm = str(gpu["compute_cap"]).replace(".", "")
    body = [
        f'{_PAD}  <gpu dev="{index}" sm="{sm}" rank="{index}" gdr="1">',
        f'{_PAD}    <nvlink target="fffffff:ffff:ff" count="18" tclass="0x068000"/>',
        f"{_PAD}  </gpu>",
    ]
    return _pci(_ids(busid, "0x030200", "0x" + ids[6:], "0x" + ids[2:6]), body, _PAD)


def _nic_entry(nic: dict[str, Any], dev: int) -> list[str]:
    net = {
        "name": nic["ibdev"],
        "dev": dev,
        "speed": int(nic["speed_gbps"]) * 1000,
        "port": nic["port"],
        "latency": "0.000000",
        "guid": f"0x{int(str(nic['node_guid']).replace(':', ''), 16):x}",
        "maxconn": 131072,
        "gdr": 1,
    }
    line = " ".join(f'{k}="{v}"' for k, v in net.items())
    body = [f"{_PAD}  <nic>", f"{_PAD}    <net {line}/>", f"{_PAD}  </nic>"]
    return _pci(_ids(str(nic["pci_bus_id"]), "0x020000", "0x15b3", str(nic["pci_device_id"])), body, _PAD)


_PAD = "      "


def stale_text(state: State) -> str:
    """The node's topology as it was before the change (see the module docstring)."""
    gpus = present_gpus(state)
    nics = sorted(state["nics"], key=lambda n: str(n["pci_bus_id"]))
    numa_ids = sorted(int(n["id"]) for n in state["numa_nodes"])
    placed: dict[int, list[tuple[str, list[str]]]] = {n: [] for n in numa_ids}
    for index, gpu in enumerate(gpus):
        busid = sysfs_bdf(gpu["pci_bus_id"])
        if index == len(gpus) - 1:
            busid = _moved(busid)
        placed[int(gpu["numa_node"])].append((busid, _gpu_entry(gpu, index, busid)))
    for dev, nic in enumerate(nics[:-1]):  # the last NIC was fitted later
        numa = int(nic["numa_node"])
        if dev == 0 and len(numa_ids) > 1:  # and the first hung off the other socket
            numa = numa_ids[(numa_ids.index(numa) + 1) % len(numa_ids)]
        placed[numa].append((str(nic["pci_bus_id"]), _nic_entry(nic, dev)))
    cpu = state["cpu"]
    lines = ['<system version="1">']
    for numa in numa_ids:
        lines.append(
            f'  <cpu numaid="{numa}" arch="{cpu["arch"]}" vendor="{cpu["vendor"]}" '
            f'familyid="{cpu["family"]}" modelid="{cpu["model"]}">'
        )
        body = [line for _, entry in sorted(placed[numa]) for line in entry]
        switch = _ids(f"0000:{0x10 + numa * 0x80:02x}:00.0", "0x060400", "0x1000", "0xc030")
        lines.extend(_pci(switch, body, "    "))
        lines.append("  </cpu>")
    lines.append("</system>")
    return "\n".join(lines) + "\n"


def _write_in_place(path: Path, text: str) -> None:
    # Rewrite the upper-dir file in place (same inode): the node's mounted overlay sees it at once.
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+", encoding="utf-8") as handle:
        handle.seek(0)
        handle.truncate()
        handle.write(text)


def stale_nccl_topo(state: State, sys_root: Path) -> None:
    path = _etc(sys_root) / TOPO_FILE
    node_dir = sys_root.parent
    if path.exists():
        (node_dir / _SAVED).write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    else:
        (node_dir / _ABSENT).write_text("", encoding="utf-8")
    _write_in_place(path, stale_text(state))


def stale_nccl_topo_clear(state: State, sys_root: Path) -> None:
    path = _etc(sys_root) / TOPO_FILE
    node_dir = sys_root.parent
    saved, absent = node_dir / _SAVED, node_dir / _ABSENT
    if saved.exists():
        _write_in_place(path, saved.read_text(encoding="utf-8"))
        saved.unlink()
    elif absent.exists():
        path.unlink(missing_ok=True)
        absent.unlink()


FaultFn = Callable[[State, Path], None]
FAULTS: dict[str, tuple[FaultFn, FaultFn]] = {"stale-nccl-topo": (stale_nccl_topo, stale_nccl_topo_clear)}
