# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""lldpd's ``lldpctl -f json0`` and ``lldpctl -f json``: text in, the neighbours per local port out.

Both shapes come from lldpd's src/client/json_writer.c:

- ``-f json0`` (the stable one, preferred): every level is a list and every leaf an object
  with ``value`` (``"chassis": [{"name": [{"value": "leaf01"}], "id": [{"type": "mac",
  "value": ...}], "mgmt-ip": [{"value": ...}, ...]}]``); an interface carries its ``name``;
- ``-f json``: an element with a name is keyed by it (``"interface": {"eth0": {...}}``,
  ``"chassis": {"leaf01": {...}}``), one element is an object and several a list, a leaf is a
  plain string (``"mgmt-ip": "10.0.0.1"`` or ``["10.0.0.1", "fe80::1"]``).

:func:`parse_lldpctl` reads either and returns one shape: ``{local interface: [neighbour, ...]}``
in lldpctl's order, one neighbour per LLDP peer heard on that interface (a switch port normally
gives one), each ``{chassis_name, chassis_id, chassis_id_type, chassis_descr, port_id,
port_id_type, port_descr, mgmt_ip: [str], mfs, ttl, via, age}``. ``port_id`` is the switch port
(``ifname`` type on Cumulus, Arista, H3C and Huawei: ``swp14``, ``25GE1/0/39``; ``local`` on SONiC:
``Ethernet120``), ``port_descr`` its description (SONiC's alias), ``mfs`` the 802.3 maximum frame
size when the switch sends it. A field the switch did not send is None (``mgmt_ip`` is []).

Empty, cut or malformed output, a neighbour without the chassis and port IDs LLDP requires, an
address that is not an IP address or a number out of its TLV's range raise ParseError, whose
message starts with "lldpctl: ". No neighbour at all (``{"lldp": {}}``) is an empty dict.

Pure (no I/O); runs on the managed node (Python 3.11, stdlib only).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from typing import Any, TypeVar

from ansible_collections.gpufleet.node.plugins.module_utils.core.parsing import guard, load_json

TOOL = "lldpctl"

Func = TypeVar("Func", bound=Callable[..., Any])

# LLDP's TTL and 802.3's maximum frame size are 2-octet TLV fields.
_TLV_MAX = 65535

# A Linux interface name: up to 15 bytes, no whitespace and no '/' (dev_valid_name).
_IFNAME = re.compile(r"^[^\s/:]{1,15}$")


class ParseError(ValueError):
    """Raised when lldpctl's JSON is empty, cut, or not in either of its shapes."""


def _guard(tool: str) -> Callable[[Func], Func]:
    """parsing.guard with this module's ParseError."""
    return guard(ParseError, tool)


def _str(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ParseError("lldpctl: %s is %r, not a non-empty string" % (what, value))
    return value


def _int(value: str | None, what: str, low: int = 0) -> int | None:
    if value is None:
        return None
    if not re.fullmatch(r"[0-9]{1,5}", value) or not low <= int(value) <= _TLV_MAX:
        raise ParseError("lldpctl: %s is %r, not a number %d..%d" % (what, value, low, _TLV_MAX))
    return int(value)


def _ip(value: str, iface: str) -> str:
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        raise ParseError("lldpctl: %s: mgmt-ip %r is not an IP address" % (iface, value)) from None


# ------------------------------------------------------------------ -f json0: lists everywhere


def _items(node: dict[str, Any], key: str, what: str) -> list[dict[str, Any]]:
    items = node.get(key, [])
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise ParseError("lldpctl: %s %s is not a list of objects (-f json0)" % (what, key))
    return items


def _one(node: dict[str, Any], key: str, what: str) -> dict[str, Any] | None:
    items = _items(node, key, what)
    if len(items) > 1:
        raise ParseError("lldpctl: %s has %d %s entries, expected one" % (what, len(items), key))
    return items[0] if items else None


def _leaf0(node: dict[str, Any], key: str, what: str) -> str | None:
    item = _one(node, key, what)
    return None if item is None else _str(item.get("value"), "%s %s" % (what, key))


def _typed0(node: dict[str, Any], key: str, what: str) -> tuple[str | None, str | None]:
    item = _one(node, key, what)
    if item is None:
        return None, None
    return _str(item.get("value"), "%s %s" % (what, key)), _str(item.get("type"), "%s %s type" % (what, key))


def _json0(lldp: list[Any]) -> list[tuple[str, dict[str, Any]]]:
    found: list[tuple[str, dict[str, Any]]] = []
    for block in lldp:
        if not isinstance(block, dict):
            raise ParseError("lldpctl: lldp entry is not an object (-f json0)")
        for entry in _items(block, "interface", "lldp"):
            iface = _str(entry.get("name"), "interface name")
            chassis = _one(entry, "chassis", iface) or {}
            port = _one(entry, "port", iface) or {}
            mgmt = [
                _str(item.get("value"), iface + " mgmt-ip")
                for item in _items(chassis, "mgmt-ip", iface + " chassis")
            ]
            name = _leaf0(chassis, "name", iface + " chassis")
            found.append((iface, _neighbour(iface, entry, chassis, port, name, mgmt, _leaf0, _typed0)))
    return found


# ------------------------------------------------------------------ -f json: keyed by name


def _listed(value: Any, what: str) -> list[Any]:
    """-f json writes one element as itself and several as a list."""
    return value if isinstance(value, list) else [value]


def _leaf(node: dict[str, Any], key: str, what: str) -> str | None:
    value = node.get(key)
    return None if value is None else _str(value, "%s %s" % (what, key))


def _typed(node: dict[str, Any], key: str, what: str) -> tuple[str | None, str | None]:
    value = node.get(key)
    if value is None:
        return None, None
    if not isinstance(value, dict):
        raise ParseError("lldpctl: %s %s is not an object with type and value" % (what, key))
    return _str(value.get("value"), "%s %s" % (what, key)), _str(
        value.get("type"), "%s %s type" % (what, key)
    )


def _is_typed(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"type", "value"}


def _chassis(value: Any, iface: str) -> tuple[str | None, dict[str, Any]]:
    """(name, body): a chassis with a system name is keyed by it, one without is the body itself."""
    if value is None:
        return None, {}
    if not isinstance(value, dict):
        raise ParseError("lldpctl: %s chassis is not an object (-f json)" % iface)
    if len(value) == 1 and not _is_typed(value.get("id")):
        name, body = next(iter(value.items()))
        if not isinstance(body, dict):
            raise ParseError("lldpctl: %s chassis %r is not an object (-f json)" % (iface, name))
        return _str(name, iface + " chassis name"), body
    return None, value


def _json(lldp: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    found: list[tuple[str, dict[str, Any]]] = []
    interfaces = lldp.get("interface", [])
    for keyed in _listed(interfaces, "interface"):
        if not isinstance(keyed, dict):
            raise ParseError("lldpctl: interface entry is not an object (-f json)")
        for iface, entry in keyed.items():
            if not isinstance(entry, dict):
                raise ParseError("lldpctl: interface %r is not an object (-f json)" % iface)
            name, chassis = _chassis(entry.get("chassis"), iface)
            port = entry.get("port", {})
            if not isinstance(port, dict):
                raise ParseError("lldpctl: %s port is not an object (-f json)" % iface)
            mgmt = [_str(ip, iface + " mgmt-ip") for ip in _listed(chassis.get("mgmt-ip", []), "mgmt-ip")]
            found.append((iface, _neighbour(iface, entry, chassis, port, name, mgmt, _leaf, _typed)))
    return found


# ------------------------------------------------------------------ both


def _neighbour(
    iface: str,
    entry: dict[str, Any],
    chassis: dict[str, Any],
    port: dict[str, Any],
    name: str | None,
    mgmt: list[str],
    leaf: Callable[[dict[str, Any], str, str], str | None],
    typed: Callable[[dict[str, Any], str, str], tuple[str | None, str | None]],
) -> dict[str, Any]:
    """One neighbour in the shape both formats give; ``leaf`` and ``typed`` read the format's values."""
    chassis_id, chassis_type = typed(chassis, "id", iface + " chassis")
    port_id, port_type = typed(port, "id", iface + " port")
    return {
        "chassis_name": name,
        "chassis_id": chassis_id,
        "chassis_id_type": chassis_type,
        "chassis_descr": leaf(chassis, "descr", iface + " chassis"),
        "port_id": port_id,
        "port_id_type": port_type,
        "port_descr": leaf(port, "descr", iface + " port"),
        "mgmt_ip": mgmt,
        "mfs": leaf(port, "mfs", iface + " port"),
        "ttl": leaf(port, "ttl", iface + " port") or leaf(chassis, "ttl", iface + " chassis"),
        # the same plain values in both formats
        "via": _leaf(entry, "via", iface),
        "age": _leaf(entry, "age", iface),
    }


@_guard(TOOL)
def parse_lldpctl(text: str) -> dict[str, list[dict[str, Any]]]:
    """``lldpctl -f json0`` or ``-f json`` -> ``{interface: [neighbour, ...]}`` (see the module doc)."""
    document = load_json(text, ParseError, TOOL)
    if not isinstance(document, dict) or "lldp" not in document:
        raise ParseError('lldpctl: no top-level "lldp" object')
    lldp = document["lldp"]
    if isinstance(lldp, list):
        found = _json0(lldp)
    elif isinstance(lldp, dict):
        found = _json(lldp)
    else:
        raise ParseError('lldpctl: "lldp" is neither an object (-f json) nor a list (-f json0)')
    neighbours: dict[str, list[dict[str, Any]]] = {}
    for iface, neighbour in found:
        if not _IFNAME.match(iface):
            raise ParseError("lldpctl: %r is not an interface name" % iface)
        # LLDP requires the Chassis ID and Port ID TLVs: lldpd prints both for every neighbour.
        for key in ("chassis_id", "port_id"):
            if neighbour[key] is None:
                raise ParseError("lldpctl: %s neighbour has no %s" % (iface, key.replace("_", " ")))
        neighbour["mgmt_ip"] = [_ip(ip, iface) for ip in neighbour["mgmt_ip"]]
        neighbour["mfs"] = _int(neighbour["mfs"], iface + " port mfs", low=1)
        neighbour["ttl"] = _int(neighbour["ttl"], iface + " ttl")
        neighbours.setdefault(iface, []).append(neighbour)
    return neighbours


def neighbour_of(neighbours: dict[str, list[dict[str, Any]]], interface: str) -> dict[str, Any] | None:
    """The one neighbour heard on ``interface``, None when none was; ParseError naming lldpctl when
    several were (a port cabled to one switch port hears one peer: more is a hub or a loop)."""
    heard = neighbours.get(interface, [])
    if len(heard) > 1:
        raise ParseError(
            "lldpctl: %s hears %d neighbours (%s), expected one switch port"
            % (interface, len(heard), ", ".join("%s:%s" % (n["chassis_name"], n["port_id"]) for n in heard))
        )
    return heard[0] if heard else None
