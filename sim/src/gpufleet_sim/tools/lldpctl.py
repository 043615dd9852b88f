"""Fake `lldpctl` (lldpd's client): the neighbours the node's RoCE ports hear, from the fleet's cabling
(each NIC's ``neighbor`` in the node state; build._cabling).

Formats, shaped on Debian's lldpd 1.0.16 hearing another lldpd (the switch side of a Cumulus leaf
is lldpd too): tests/fixtures/real/lldp/debian-lldpd-1.0.16-lldpctl-json0.json and -json.json, which
tests/conformance/test_lldpd_real.py keeps equal in shape to the real daemon's output:
- ``-f json0``: every level a list of objects, each value ``[{"value": ...}]``;
- ``-f json``: an object per interface keyed by its name (a list of them when there are several),
  the chassis keyed by the switch's name, single values plain.
The chassis carries ``mgmt-iface`` (the ifindex of the address's interface) after ``mgmt-ip``; the
port ``ttl`` and ``auto-negotiation``, and no ``mfs`` (lldpd 1.0.16 sent no 802.3 maximum frame
size from a port of MTU 9216).
Interface names after the options limit the output, as lldpctl's do; ``-v`` prints the version.
Only RoCE ports whose link is up hear a neighbour. A Cumulus leaf identifies its port by ``ifname``
(swpN). With no neighbour at all lldpctl prints ``{"lldp": [{}]}`` (json0) and ``{"lldp": {}}`` (json).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from gpufleet_sim import state

_FORMATS = ("json0", "json")
_CAPABILITIES = [{"type": "Bridge", "enabled": True}, {"type": "Router", "enabled": True}]
_TTL = "120"
# the leaf's eth0 (its management address's interface; lo is 1)
_MGMT_IFACE = "2"
# what lldpd reports of the leaf port's PHY: the shape is the real one (a port without autoneg);
# the MAU type is assumed for a 400G port
_AUTONEG = {"supported": False, "enabled": False}
_MAU = "400GbaseR - 400GBASE-R Multi-lane PCS over undefined PMA/PMD"
_VERSION = "1.0.16"
# lldpd's age of a neighbour ("<days> day, HH:MM:SS"); the simulated cables were plugged a while ago
_AGE = "0 day, 01:00:00"


def _json0(iface: str, rid: int, neighbor: dict[str, Any]) -> dict[str, Any]:
    def value(text: Any) -> list[dict[str, str]]:
        return [{"value": str(text)}]

    return {
        "name": iface,
        "via": "LLDP",
        "rid": str(rid),
        "age": _AGE,
        "chassis": [
            {
                "id": [{"type": "mac", "value": neighbor["chassis_mac"]}],
                "name": value(neighbor["chassis"]),
                "descr": value(neighbor["descr"]),
                "mgmt-ip": value(neighbor["mgmt_ip"]),
                "mgmt-iface": value(_MGMT_IFACE),
                "capability": _CAPABILITIES,
            }
        ],
        "port": [
            {
                "id": [{"type": "ifname", "value": neighbor["port"]}],
                "descr": value(neighbor["port_descr"]),
                "ttl": value(_TTL),
                "auto-negotiation": [{**_AUTONEG, "current": value(_MAU)}],
            }
        ],
    }


def _json(iface: str, rid: int, neighbor: dict[str, Any]) -> dict[str, Any]:
    return {
        iface: {
            "via": "LLDP",
            "rid": str(rid),
            "age": _AGE,
            "chassis": {
                neighbor["chassis"]: {
                    "id": {"type": "mac", "value": neighbor["chassis_mac"]},
                    "descr": neighbor["descr"],
                    "mgmt-ip": neighbor["mgmt_ip"],
                    "mgmt-iface": _MGMT_IFACE,
                    "capability": _CAPABILITIES,
                }
            },
            "port": {
                "id": {"type": "ifname", "value": neighbor["port"]},
                "descr": neighbor["port_descr"],
                "ttl": _TTL,
                "auto-negotiation": {**_AUTONEG, "current": _MAU},
            },
        }
    }


def _neighbours(node: state.State, wanted: list[str]) -> list[tuple[str, int, dict[str, Any]]]:
    """(interface, lldpd's remote id, neighbour) per port that hears one, in the NICs' order."""
    heard = []
    chassis_ids: dict[str, int] = {}
    for nic in node["nics"]:
        neighbor = nic.get("neighbor")
        if not neighbor or not nic.get("link_up", True) or (wanted and nic["netdev"] not in wanted):
            continue
        rid = chassis_ids.setdefault(neighbor["chassis"], len(chassis_ids) + 1)
        heard.append((nic["netdev"], rid, neighbor))
    return heard


def main(argv: list[str], node_dir: Path) -> int:
    fmt, names, args = "keyvalue", [], list(argv)
    while args:
        arg = args.pop(0)
        if arg == "-f" and args:
            fmt = args.pop(0)
        elif arg.startswith("-f") and len(arg) > 2:
            fmt = arg[2:]
        elif arg == "-v":
            # lldpcli prints its version and exits at -v, whatever else is given
            print(_VERSION)
            return 0
        elif arg.startswith("-"):
            print(f"lldpctl: invalid option -- '{arg.lstrip('-')[:1]}'", file=sys.stderr)
            return 1
        else:
            names.append(arg)
    if fmt not in _FORMATS:
        print(f"lldpctl: unknown output format {fmt!r} (simulated: json0, json)", file=sys.stderr)
        return 1
    heard = _neighbours(state.load(node_dir), names)
    if fmt == "json0":
        document: dict[str, Any] = {"lldp": [{"interface": [_json0(*n) for n in heard]} if heard else {}]}
    elif len(heard) == 1:
        document = {"lldp": {"interface": _json(*heard[0])}}
    else:
        document = {"lldp": {"interface": [_json(*n) for n in heard]} if heard else {}}
    print(json.dumps(document, indent=2))
    return 0
