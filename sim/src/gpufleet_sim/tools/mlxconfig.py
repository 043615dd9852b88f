"""Fake `mlxconfig [-y] [-e] -d <dev> q [PARAM...] | set PARAM=VALUE...`: NIC firmware settings.

Layout (column widths included) of a real mstconfig/mlxconfig dump of a ConnectX-6 Dx (search
index id 30996631291): a "Device #N:" header block with fields padded to 20 columns, then
"Configurations:" with the parameter names padded to 44 and the values to 20 (21 for Next Boot
in a set). Next Boot is the value the firmware loads at its next reset: LINK_TYPE_P1 shows the
pending link type after a set. Only LINK_TYPE_P1 is settable; the other parameters are the
device defaults from that dump.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from gpufleet_sim import sysfs_rdma
from gpufleet_sim.state import locked

_LINK_TYPES = {"ETH": "eth", "2": "eth", "IB": "ib", "1": "ib"}
_LINK_TYPE_TEXT = {"eth": "ETH(2)", "ib": "IB(1)"}
_COLUMNS = {False: ["Next Boot"], True: ["Default", "Current", "Next Boot"]}


def _params(nic: dict[str, Any]) -> dict[str, str]:
    next_link = nic.get("pending_link_type") or nic["link_type"]
    return {
        "NUM_OF_VFS": "0",
        "SRIOV_EN": "False(0)",
        "LINK_TYPE_P1": _LINK_TYPE_TEXT[next_link],
        "KEEP_ETH_LINK_UP_P1": "True(1)",
        "ROCE_CC_PRIO_MASK_P1": "255",
        "CNP_DSCP_P1": "48",
        "CNP_802P_PRIO_P1": "6",
        "ROCE_CONTROL": "ROCE_ENABLE(2)",
    }


def _header(index: int, nic: dict[str, Any], device: str) -> list[str]:
    model = str(nic["model"])
    return [
        "",
        f"Device #{index}:",
        "----------",
        "",
        f"{'Device type:':<20}{model.replace('-', ''):<20}",
        f"{'Name:':<20}{nic['part_number'] + '_Ax':<20}",
        f"{'Description:':<20}NVIDIA {model} adapter card; single-port OSFP; PCIe 6.0 x16",
        f"{'Device:':<20}{device:<20}",
        "",
    ]


def _query(nics: list[tuple[dict[str, Any], str]], names: list[str], verbose: bool) -> int:
    lines: list[str] = []
    for index, (nic, device) in enumerate(nics, start=1):
        params = _params(nic)
        lines += _header(index, nic, device)
        columns = _COLUMNS[verbose]
        lines.append(f"{'Configurations:':<52}" + "".join(f"{c:<16}" for c in columns).rstrip())
        for name in names or list(params):
            if name not in params:
                print("\n".join(lines))
                print(f"-E- The Device doesn't support {name} parameter")
                return 1
            default = current = params[name]
            if name == "LINK_TYPE_P1":
                default, current = _LINK_TYPE_TEXT["eth"], _LINK_TYPE_TEXT[nic["link_type"]]
            values = [default, current, params[name]] if verbose else [params[name]]
            row = f"        {name:<44}" + "".join(f"{v:<16}" for v in values[:-1]) + f"{values[-1]:<20}"
            # -e marks a value that will differ from the default or the current one
            lines.append("*" + row[1:] if verbose and len(set(values)) > 1 else row)
    if verbose:
        lines.append("The '*' shows parameters with next value different from default/current value.")
    print("\n".join(lines))
    return 0


def _set(nic: dict[str, Any], device: str, assignments: list[str], assume_yes: bool) -> int:
    params = _params(nic)
    changes: list[tuple[str, str]] = []
    for assignment in assignments:
        name, sep, value = assignment.partition("=")
        if not sep or not value:
            print(f"-E- Failed to parse parameter: {assignment}")
            return 1
        if name not in params:
            print(f"-E- The Device doesn't support {name} parameter")
            return 1
        if name != "LINK_TYPE_P1":
            print(f"-E- Setting {name} is not supported by this node's firmware tools")
            return 1
        if value.upper() not in _LINK_TYPES:
            print(f"-E- Bad value {value} for parameter {name}")
            return 1
        changes.append((name, _LINK_TYPE_TEXT[_LINK_TYPES[value.upper()]]))
    lines = _header(1, nic, device)
    lines.append(f"{'Configurations:':<52}{'Next Boot':<16}New")
    lines += [f"        {name:<44}{params[name]:<21}{new:<20}" for name, new in changes]
    lines.append("")
    print("\n".join(lines))
    answer = "y" if assume_yes else sys.stdin.readline().strip().lower()
    print(f" Apply new Configuration? (y/n) [n] : {answer}")
    if answer != "y":
        print("Aborted by user")
        return 1
    for _, new in changes:
        nic["pending_link_type"] = "eth" if new.startswith("ETH") else "ib"
    print("Applying... Done!")
    print("-I- Please reboot machine to load new configurations.")
    return 0


def main(argv: list[str], node_dir: Path) -> int:
    device, assume_yes, verbose, args = None, False, False, list(argv)
    while args and args[0].startswith("-"):
        arg = args.pop(0)
        if arg in ("-d", "--dev") and args:
            device = args.pop(0)
        elif arg in ("-y", "--yes"):
            assume_yes = True
        elif arg in ("-e", "--enable_verbosity"):
            verbose = True
        else:
            print(f"-E- Unknown flag: {arg}")
            return 1
    if not args or args[0] not in ("q", "query", "s", "set"):
        print("-E- No command found. For more information please read the help message:")
        return 1
    command, rest = args[0], args[1:]
    with locked(node_dir) as state:
        if device is None:
            nics = [(nic, str(nic["pci_bus_id"])) for nic in state["nics"]]
        else:
            nic = sysfs_rdma.find_nic(state, device)
            if nic is None:
                print("-E- Failed to open the device")
                return 1
            nics = [(nic, device)]
        if command in ("q", "query"):
            return _query(nics, rest, verbose)
        if device is None or not rest:
            print("-E- Please specify a device and at least one parameter to set")
            return 1
        return _set(nics[0][0], device, rest, assume_yes)
