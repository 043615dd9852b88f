"""Fake `cma_roce_mode -d <dev> -p <port> [-m 1|2]` (mlnx-tools sbin/cma_roce_mode).

Like the real script it works on configfs: -m 1 writes "IB/RoCE v1" and -m 2 "RoCE v2" to
rdma_cm/<dev>/ports/<port>/default_roce_mode, then it prints that file. The real script
creates the <dev> group when missing and removes it when done; here the group is part of
the node's tree (its files are plain files that would lose the value) and stays.
"""

from __future__ import annotations

import sys
from pathlib import Path

from gpufleet_sim import sysfs_rdma
from gpufleet_sim.state import load

_USAGE = """Set/Show RoCE default mode of RDMA_CM applications

Usage:
\tcma_roce_mode OPTIONS
Options:
\t-h              show this help
\t-d <dev>        use IB device <dev> (default mlx5_0)
\t-p <port>       use port <port> of IB device (default 1)
\t-m <roce_mode>  set RoCE mode of RDMA_CM applications (1 or 2)"""


def _getopts(argv: list[str]) -> tuple[dict[str, str], bool]:
    """bash `getopts "d:m:hp:"`: values by letter; True when -h was given."""
    values: dict[str, str] = {}
    args = list(argv)
    while args and args[0].startswith("-") and args[0] != "-":
        arg = args.pop(0)
        letter, inline = arg[1:2], arg[2:]
        if letter == "h":
            return values, True
        if letter in ("d", "m", "p"):
            if not inline and not args:
                print(f"cma_roce_mode: option requires an argument -- {letter}", file=sys.stderr)
                continue
            values[letter] = inline or args.pop(0)
        else:
            print(f"cma_roce_mode: illegal option -- {letter}", file=sys.stderr)
    return values, False


def _mode_number(text: str) -> int | None:
    """`[ $MODE -eq 1 ]`: a non-number makes bash complain and compare false."""
    try:
        return int(text)
    except ValueError:
        print(f"cma_roce_mode: line 97: [: {text}: integer expression expected", file=sys.stderr)
        return None


def main(argv: list[str], node_dir: Path) -> int:
    values, show_help = _getopts(argv)
    if show_help:
        print(_USAGE)
        return 0
    device, port, mode = values.get("d", "mlx5_0"), values.get("p", "1"), values.get("m", "0")
    rdma_cm = node_dir / "sys" / "kernel" / "config" / "rdma_cm"
    if not rdma_cm.is_dir():
        print("Module rdma_cm is not loaded or does not support configfs")
        return 1
    if not (rdma_cm / device).is_dir():
        nic = sysfs_rdma.find_nic(load(node_dir), device)
        if nic is None or nic["ibdev"] != device:
            print(f"mkdir: cannot create directory '{device}': No such device", file=sys.stderr)
            print(f"Failed to create configuration for {device}")
            return 1
        # a new group shows the kernel's defaults for the device's ports
        sysfs_rdma.write_roce_mode(node_dir / "sys", nic, sysfs_rdma.ROCE_V2)
        (sysfs_rdma.configfs_port_dir(node_dir / "sys", nic) / "default_roce_tos").write_text(
            "0\n", encoding="utf-8"
        )
    port_dir = rdma_cm / device / "ports" / port
    if not port_dir.is_dir():
        print(f"Device {device} port {port} does not exist")
        return 1
    number = _mode_number(mode)
    if number == 1:
        (port_dir / "default_roce_mode").write_text(sysfs_rdma.ROCE_V1 + "\n", encoding="utf-8")
    elif number == 2:
        (port_dir / "default_roce_mode").write_text(sysfs_rdma.ROCE_V2 + "\n", encoding="utf-8")
    print((port_dir / "default_roce_mode").read_text(encoding="utf-8"), end="")
    return 0
