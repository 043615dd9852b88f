"""Fake `ibdev2netdev` (mlnx-tools ofed_scripts/ibdev2netdev): RDMA device -> netdev, from sysfs.

Like the real script it reads only sysfs: the RDMA devices under class/infiniband, the netdev
of GID 0 (gid_attrs/ndevs/0), and the netdev's carrier for Up/Down. It prints nothing when no
netdev belongs to a Mellanox PCI function (vendor 0x15b3), and exits 255 when the RDMA stack
is not loaded (no class/infiniband).
"""

from __future__ import annotations

import os
from pathlib import Path

_USAGE = "\n".join(
    [
        "ibdev2netdev <options>",
        "-h, --help                print help message",
        "-v, --verbose             print more info",
    ]
)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError:
        return None


def _link_state(sys_root: Path, netdev: str) -> str:
    net = sys_root / "class" / "net" / netdev
    if not (net / "dev_id").exists():
        return ""
    carrier = _read(net / "carrier")
    if carrier is None:
        return "NA"
    return "Up" if carrier == "1" else "Down"


def _has_mellanox_netdev(sys_root: Path) -> bool:
    net = sys_root / "class" / "net"
    names = sorted(os.listdir(net)) if net.is_dir() else []
    return any("0x15b3" in (_read(net / name / "device" / "vendor") or "") for name in names)


def _verbose(sys_root: Path, ibdev: str, port: str, netdev: str, link: str) -> str:
    ib = sys_root / "class" / "infiniband" / ibdev
    state = _read(ib / "ports" / port / "state")
    ibstate = f"{state.split()[1]:<6}" if state and len(state.split()) > 1 else "NA"
    device_id = _read(ib / "device" / "device")
    devid = f"MT{int(device_id, 0)}" if device_id else "NA"
    fwver = _read(ib / "fw_ver") or "NA"
    # The real script takes the description and part number from the PCI VPD; without one
    # (as here) it prints an empty description and part "NA".
    partid, devdesc = "NA", ""
    pdev = os.path.basename(os.path.realpath(ib / "device")) if (ib / "device").exists() else ""
    head = f"{pdev} {ibdev} ({devid} - {partid}) {devdesc} fw {fwver}"
    return f"{head} port {port} ({ibstate}) ==> {netdev} ({link})"


def main(argv: list[str], node_dir: Path) -> int:
    if argv[:1] in (["-h"], ["--help"]):
        print(_USAGE)
        return 0
    if len(argv) > 1 or (argv and argv[0] != "-v"):
        print(_USAGE)
        return 255
    verbose = argv == ["-v"]
    sys_root = node_dir / "sys"
    ib_root = sys_root / "class" / "infiniband"
    if not ib_root.is_dir():
        return 255  # driver is stopped
    if not _has_mellanox_netdev(sys_root):
        return 0
    for ibdev in sorted(os.listdir(ib_root)):
        ports_dir = ib_root / ibdev / "ports"
        for port in sorted(os.listdir(ports_dir)) if ports_dir.is_dir() else []:
            netdev = _read(ports_dir / port / "gid_attrs" / "ndevs" / "0")
            if not netdev:
                continue
            link = _link_state(sys_root, netdev)
            if verbose:
                print(_verbose(sys_root, ibdev, port, netdev, link))
            else:
                print(f"{ibdev} port {port} ==> {netdev} ({link})")
    return 0
