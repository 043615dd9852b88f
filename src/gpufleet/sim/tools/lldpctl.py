"""Fake `lldpctl` (lldpd's client): the neighbours the node's RoCE ports hear, from the fleet's cabling
(each NIC's ``neighbor`` in the node state; build._cabling).

Formats, shaped on the real captures in tests/fixtures/real/lldp/ (lldpd's src/client/json_writer.c):
- ``-f json0``: every level a list of objects, each value ``[{"value": ...}]``
  (unifabric-5nic-sonic-leaves-lldpctl-json0.json);
- ``-f json``: an object per interface keyed by its name (a list of them when there are several),
  the chassis keyed by the switch's name, single values plain (sichek-*-lldpctl-json.json).
Interface names after the options limit the output, as lldpctl's do. Only RoCE ports whose link is
up hear a neighbour. A Cumulus leaf identifies its port by ``ifname`` (swpN).
Assumed, not captured: with no neighbour at all lldpctl prints ``{"lldp": [{}]}`` (json0) and
``{"lldp": {}}`` (json).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from gpufleet.sim import state

_FORMATS = ("json0", "json")
_CAPABILITIES = [{"type": "Bridge", "enabled": True}, {"type": "Router", "enabled": True}]
_TTL = "120"
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
                "capability": _CAPABILITIES,
            }
        ],
        "port": [
            {
                "id": [{"type": "ifname", "value": neighbor["port"]}],
                "descr": value(neighbor["port_descr"]),
                "ttl": value(_TTL),
                "mfs": value(neighbor["mfs"]),
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
                    "capability": _CAPABILITIES,
                }
            },
            "port": {
                "id": {"type": "ifname", "value": neighbor["port"]},
                "descr": neighbor["port_descr"],
                "ttl": _TTL,
                "mfs": str(neighbor["mfs"]),
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
