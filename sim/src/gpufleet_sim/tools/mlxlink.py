"""Fake `mlxlink -d <dev> [-p <port>] [-m|--show_module]`: a NIC port's link as MFT prints it.

Layout from real captures (tests/fixtures/real/mellanox/*mlxlink*): "Key" padded to 35
columns, then ": value"; Ethernet speeds as "400G" with the "(Ext.)" PTYS speed masks
(bit numbers from the kernel's mlx5e_ext_link_mode), InfiniBand as "IB-NDR". A down port
shows what mlxlink shows for a port whose cable is out: state Disable, status opcode 1024
"Cable is unplugged" (PDDR troubleshooting page, MNG FW group).
The device is an RDMA device name or PCI BDF, as mlxlink accepts.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from gpufleet_sim import sysfs_rdma
from gpufleet_sim.state import load

_AMBER_VERSION = "6.4"  # simulated: the MFT 4.35 line's, as in the CX-7 capture
_MFT_VERSION = "4.35.0-159"
# PTYS ext_eth_proto bit per Ethernet speed (one lane layout each) and its mlxlink name.
_ETH_EXT = {800: (19, "800G_8X"), 400: (16, "400G_4X"), 200: (12, "200G_4X"), 100: (9, "100G_4X")}
_IB_SPEEDS = "0x000000f1 (NDR,HDR,EDR,FDR,SDR)"


def _line(key: str, value: object) -> str:
    return f"{key:<35}: {value}"


def _section(title: str, rows: list[tuple[str, object]]) -> list[str]:
    return [title, "-" * len(title), *(_line(k, v) for k, v in rows), ""]


def _eth_mask(speeds: list[int]) -> str:
    known = sorted((s for s in speeds if s in _ETH_EXT), reverse=True)
    mask = sum(1 << _ETH_EXT[s][0] for s in known)
    names = ",".join(_ETH_EXT[s][1] for s in known)
    return f"0x{mask:08x} ({names})"


def _operational(nic: dict[str, Any]) -> list[tuple[str, object]]:
    eth = nic["link_type"] == "eth"
    if not nic["link_up"]:
        state, phys, speed, width, fec = (
            "Disable",
            "ETH_AN_FSM_ENABLE" if eth else "Disabled",
            "N/A",
            "N/A",
            "N/A",
        )
    else:
        state, phys, width = "Active", "LinkUp", "4x"
        speed = f"{int(nic['speed_gbps'])}G" if eth else "IB-NDR"
        fec = "Standard_RS-FEC - (544,514)" if eth else "Ethernet_Consortium_LL_50G_RS_FEC_PLR -(272,257+1)"
    return [
        ("State", state),
        ("Physical state", phys),
        ("Speed", speed),
        ("Width", width),
        ("FEC", fec),
        ("Loopback Mode", "No Loopback"),
        ("Auto Negotiation", "ON"),
    ]


def _supported(nic: dict[str, Any]) -> list[tuple[str, object]]:
    if nic["link_type"] != "eth":
        cable = _IB_SPEEDS if nic["link_up"] else "N/A"
        return [("Enabled Link Speed", _IB_SPEEDS), ("Supported Cable Speed", cable)]
    enabled = _eth_mask([int(s) for s in nic["supported_speeds_gbps"]])
    return [
        ("Enabled Link Speed (Ext.)", enabled),
        ("Supported Cable Speed (Ext.)", enabled if nic["link_up"] else "N/A"),
    ]


def _troubleshooting(nic: dict[str, Any]) -> list[tuple[str, object]]:
    if nic["link_up"]:
        return [("Status Opcode", 0), ("Group Opcode", "N/A"), ("Recommendation", "No issue was observed")]
    return [("Status Opcode", 1024), ("Group Opcode", "MNG FW"), ("Recommendation", "Cable is unplugged")]


def _module(nic: dict[str, Any]) -> list[tuple[str, object]]:
    if not nic["link_up"]:
        return [("Identifier", "N/A"), ("Compliance", "N/A"), ("Cable Type", "N/A"), ("Module State", "N/A")]
    eth = nic["link_type"] == "eth"
    # simulated: a 1 m passive copper OSFP cable, the kind in the CX-7 capture
    return [
        ("Temperature [C]", "0 [0..0]"),
        ("Voltage [mV]", "0 [0..0]"),
        ("Identifier", "OSFP"),
        ("Compliance", "400GAUI-4-L C2M" if eth else "IB NDR"),
        ("Cable Technology", "Copper cable, passive, unequalized"),
        ("Cable Type", "Passive copper cable"),
        ("OUI", "Nvidia"),
        ("Vendor Name", "Nvidia"),
        ("Vendor Part Number", "MCP4Y10-N001"),
        ("Vendor Serial Number", "MT" + str(nic["node_guid"]).replace(":", "")[-10:].upper()),
        ("Transfer Distance [m]", 1),
        ("Module State", "Ready state"),
    ]


def render(nic: dict[str, Any], show_module: bool) -> str:
    lines = [""]
    lines += _section("Operational Info", _operational(nic))
    lines += _section("Supported Info", _supported(nic))
    lines += _section("Troubleshooting Info", _troubleshooting(nic))
    tool = [
        ("Firmware Version", nic["fw_version"]),
        ("amBER Version", _AMBER_VERSION),
        ("MFT Version", _MFT_VERSION),
    ]
    lines += _section("Tool Information", tool)
    if show_module:
        lines += _section("Module Info", _module(nic))
    return "\n".join(lines[:-1]) + "\n"


def main(argv: list[str], node_dir: Path) -> int:
    device, show_module, args = None, False, list(argv)
    while args:
        arg = args.pop(0)
        if arg in ("-d", "--device") and args:
            device = args.pop(0)
        elif arg in ("-p", "--port") and args:
            args.pop(0)  # one port per PCI function on mlx5: port 1 is the only one
        elif arg in ("-m", "--show_module"):
            show_module = True
        else:
            print(f"-E- Argument: {arg} is invalid.", file=sys.stderr)
            return 1
    if device is None:
        print("-E- Please provide a device name using -d", file=sys.stderr)
        return 1
    nic = sysfs_rdma.find_nic(load(node_dir), device)
    if nic is None:
        print(f'-E- Failed to open device: "{device}", No such file or directory', file=sys.stderr)
        return 1
    print(render(nic, show_module), end="")
    return 0
