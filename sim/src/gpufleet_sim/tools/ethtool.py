"""Fake `ethtool -a|--show-pause <if>`, `ethtool -A|--pause <if> [autoneg on|off] [rx on|off] [tx on|off]`
and `ethtool -S|--statistics <if>`.

IEEE 802.3x global pause of a NIC's netdev, as ethtool 5.x/6.x prints it (netlink or ioctl):
"Pause parameters for <if>:", then "Autonegotiate:\\t<on|off>", "RX:\\t\\t<on|off>",
"TX:\\t\\t<on|off>" and an empty line. mlx5 does not negotiate pause (its set_pauseparam refuses
autoneg), so Autonegotiate is always off and "autoneg on" fails with EINVAL as on a real port.
State: the NIC's "pause" {"rx", "tx"} in the node state; a node built before this key existed
reads off (the tuned node runs PFC, and mlx5 runs either PFC or global pause).
`-S` prints the port's counters as mlx5 names them ("NIC statistics:", then "     <name>: <value>"
lines), moved by the node's load and its path's condition (sim/roce_traffic.py), and writes the
same reading to the RDMA device's sysfs hw_counters.
Other ethtool commands are not simulated.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from gpufleet_sim import roce_traffic
from gpufleet_sim.state import load, locked

_OFF = {"rx": False, "tx": False}


def pause_of(nic: dict[str, Any]) -> dict[str, bool]:
    pause: dict[str, bool] = dict(nic.get("pause") or _OFF)
    return pause


def render(netdev: str, pause: dict[str, bool]) -> str:
    def word(flag: bool) -> str:
        return "on" if flag else "off"

    return (
        f"Pause parameters for {netdev}:\n"
        f"Autonegotiate:\toff\n"
        f"RX:\t\t{word(pause['rx'])}\n"
        f"TX:\t\t{word(pause['tx'])}\n\n"
    )


def _no_device(netdev: str) -> int:
    print("netlink error: no device matches name (offset 24)", file=sys.stderr)
    print("netlink error: No such device", file=sys.stderr)
    return 1


def _find(nics: list[dict[str, Any]], netdev: str) -> dict[str, Any] | None:
    return next((n for n in nics if n["netdev"] == netdev), None)


def _set(node_dir: Path, netdev: str, words: list[str]) -> int:
    if len(words) % 2 or not words:
        print("ethtool: bad command line argument(s)\nFor more information run ethtool -h", file=sys.stderr)
        return 1
    wanted: dict[str, bool] = {}
    for key, value in zip(words[::2], words[1::2], strict=True):
        if key not in ("autoneg", "rx", "tx") or value not in ("on", "off"):
            print(
                "ethtool: bad command line argument(s)\nFor more information run ethtool -h", file=sys.stderr
            )
            return 1
        wanted[key] = value == "on"
    with locked(node_dir) as state:
        nic = _find(state["nics"], netdev)
        if nic is None:
            return _no_device(netdev)
        if wanted.pop("autoneg", False):
            print("netlink error: Invalid argument", file=sys.stderr)
            return 1
        pause = pause_of(nic)
        pause.update(wanted)
        nic["pause"] = pause
    return 0


def _statistics(node_dir: Path, netdev: str) -> int:
    text = roce_traffic.read(node_dir, netdev, time.time())
    if text is None:
        # ethtool's do_gnicstats: the ETH_SS_STATS string set of an unknown interface
        print("Cannot get stats strings information: No such device", file=sys.stderr)
        return 96
    print(text, end="")
    return 0


def main(argv: list[str], node_dir: Path) -> int:
    if len(argv) < 2 or argv[0] not in ("-a", "--show-pause", "-A", "--pause", "-S", "--statistics"):
        print(
            "ethtool: this node's ethtool only shows and sets pause (-a, -A) and shows counters (-S)",
            file=sys.stderr,
        )
        return 1
    netdev = argv[1]
    if argv[0] in ("-S", "--statistics"):
        if len(argv) != 2:
            print(
                "ethtool: bad command line argument(s)\nFor more information run ethtool -h", file=sys.stderr
            )
            return 1
        return _statistics(node_dir, netdev)
    if argv[0] in ("-A", "--pause"):
        return _set(node_dir, netdev, argv[2:])
    if len(argv) != 2:
        print("ethtool: bad command line argument(s)\nFor more information run ethtool -h", file=sys.stderr)
        return 1
    nic = _find(load(node_dir)["nics"], netdev)
    if nic is None:
        return _no_device(netdev)
    print(render(netdev, pause_of(nic)), end="")
    return 0
