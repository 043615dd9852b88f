# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""SONiC's CONFIG_DB QoS tables: JSON in, each port's lossless RoCE path out.

Two layouts are read, alone or mixed (sonic-utilities' tests hold both):

- the database dump (``sonic-db-dump -n CONFIG_DB``, ``redis-dump``): one key per entry,
  ``"PORT_QOS_MAP|Ethernet0": {fields}``, ``"QUEUE|Ethernet0|3": {fields}``;
- ``config_db.json`` / ``sonic-cfggen`` / ``config qos reload``'s rendering: tables nested,
  ``"PORT_QOS_MAP": {"Ethernet0": {fields}}``, ``"QUEUE": {"Ethernet0|3": {fields}}``.

A key may name several ports (``"Ethernet0,Ethernet4|3-4"``) and a range of queues or priority
groups; a reference may be bare (``AZURE``) or in the old bracketed form (``[DSCP_TO_TC_MAP|AZURE]``).

:func:`parse_config_db` returns ``{"ports": {port: {...}}, "global": {...}, "dscp_to_tc": {map:
{dscp: tc}}, "tc_to_pg": {...}, "tc_to_queue": {...}, "pfc_priority_to_queue": {...},
"wred_profiles": {name: {...}}}``. Each port holds ``pfc_enable`` (the priorities with PFC, sorted),
the map names (``dscp_to_tc_map``, ``tc_to_pg_map``, ``tc_to_queue_map``, ``pfc_to_queue_map``, None
when unset) and the maps they name (``dscp_to_tc``, ``tc_to_pg``, ``tc_to_queue``: None when the dump
does not hold that map), ``mtu``, ``speed_mbps``, ``alias`` (PORT), ``queues`` ({queue: {wred_profile,
scheduler}}) and ``buffer_pg`` ({pg: profile}). The helpers below answer the lossless questions:
which TC a DSCP lands in, whether that TC's priority has PFC, whether its queue marks ECN, the MTU.

A value out of its range (DSCP 0..63, TC and queue 0..15, PFC priority and PG 0..7), a number that
is not one, an unknown ECN mode, an entry that is not an object of strings, or text that is not
JSON raise ParseError, whose message starts with "SONiC CONFIG_DB: ". Tables gpufleet does not read
are ignored.

Pure (no I/O); runs on the managed node (Python 3.11, stdlib only).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

from ansible_collections.gpufleet.node.plugins.module_utils.core.parsing import guard, load_json

TOOL = "SONiC CONFIG_DB"

Func = TypeVar("Func", bound=Callable[..., Any])

# The tables read, and what each map's keys and values are (name, highest value).
_MAPS = {
    "DSCP_TO_TC_MAP": ("dscp_to_tc", ("DSCP", 63), ("TC", 15)),
    "TC_TO_PRIORITY_GROUP_MAP": ("tc_to_pg", ("TC", 15), ("PG", 7)),
    "TC_TO_QUEUE_MAP": ("tc_to_queue", ("TC", 15), ("queue", 15)),
    "MAP_PFC_PRIORITY_TO_QUEUE": ("pfc_priority_to_queue", ("priority", 7), ("queue", 15)),
}
_TABLES = (*_MAPS, "PORT_QOS_MAP", "PORT", "QUEUE", "BUFFER_PG", "WRED_PROFILE")

# PORT_QOS_MAP's map fields -> the table their value names.
_PORT_MAP_FIELDS = {
    "dscp_to_tc_map": "DSCP_TO_TC_MAP",
    "tc_to_pg_map": "TC_TO_PRIORITY_GROUP_MAP",
    "tc_to_queue_map": "TC_TO_QUEUE_MAP",
    "pfc_to_queue_map": "MAP_PFC_PRIORITY_TO_QUEUE",
}
_RESOLVED = {"dscp_to_tc_map": "dscp_to_tc", "tc_to_pg_map": "tc_to_pg", "tc_to_queue_map": "tc_to_queue"}

# WRED_PROFILE's ecn field (sonic-yang-models sonic-wred-profile.yang).
ECN_MODES = (
    "ecn_none",
    "ecn_green",
    "ecn_yellow",
    "ecn_red",
    "ecn_green_yellow",
    "ecn_green_red",
    "ecn_yellow_red",
    "ecn_all",
)

_PORT_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_./-]*$")


class ParseError(ValueError):
    """Raised when CONFIG_DB JSON is empty, cut, or holds a QoS value SONiC would not accept."""


def _guard(tool: str) -> Callable[[Func], Func]:
    """parsing.guard with this module's ParseError."""
    return guard(ParseError, tool)


def _int(value: Any, what: str, low: int, high: int) -> int:
    if not isinstance(value, str) or not re.fullmatch(r"[0-9]{1,12}", value.strip()):
        raise ParseError("SONiC CONFIG_DB: %s is %r, not a number" % (what, value))
    number = int(value)
    if not low <= number <= high:
        raise ParseError("SONiC CONFIG_DB: %s is %d, not within %d..%d" % (what, number, low, high))
    return number


def _range(text: str, what: str, high: int) -> list[int]:
    """'3' -> [3], '3-4' -> [3, 4] (a QUEUE or BUFFER_PG key's index part)."""
    first, sep, last = text.partition("-")
    low = _int(first, what, 0, high)
    top = _int(last, what, 0, high) if sep else low
    if top < low:
        raise ParseError("SONiC CONFIG_DB: %s range %r runs backwards" % (what, text))
    return list(range(low, top + 1))


def _ports(text: str, what: str) -> list[str]:
    names = text.split(",")
    for name in names:
        if not _PORT_NAME.match(name):
            raise ParseError("SONiC CONFIG_DB: %s key %r does not name a port" % (what, text))
    return names


def _ref(value: Any, table: str, what: str) -> str:
    """A reference to an entry of ``table``: 'AZURE' or the old '[DSCP_TO_TC_MAP|AZURE]'."""
    if not isinstance(value, str) or not value.strip():
        raise ParseError("SONiC CONFIG_DB: %s is %r, not a name" % (what, value))
    if value.startswith("["):
        match = re.fullmatch(r"\[" + re.escape(table) + r"\|([^\]|]+)\]", value)
        if not match:
            raise ParseError("SONiC CONFIG_DB: %s %r is not a reference to %s" % (what, value, table))
        return match.group(1)
    return value


def _tables(document: dict[str, Any]) -> dict[str, dict[str, dict[str, str]]]:
    """{table: {key: fields}} from either layout, for the tables read."""
    tables: dict[str, dict[str, dict[str, str]]] = {table: {} for table in _TABLES}
    entries: list[tuple[str, str, Any]] = []
    for top, value in document.items():
        if "|" in top:
            table, key = top.split("|", 1)
            entries.append((table, key, value))
        elif top in tables:
            if not isinstance(value, dict):
                raise ParseError("SONiC CONFIG_DB: table %s is not an object" % top)
            entries.extend((top, key, fields) for key, fields in value.items())
    for table, key, fields in entries:
        if table not in tables:
            continue
        if not isinstance(fields, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in fields.items()
        ):
            raise ParseError("SONiC CONFIG_DB: %s|%s is not an object of strings" % (table, key))
        if key in tables[table]:
            raise ParseError("SONiC CONFIG_DB: %s|%s is defined twice" % (table, key))
        tables[table][key] = fields
    return tables


def _map(fields: dict[str, str], table: str, name: str) -> dict[int, int]:
    (key_what, key_top), (value_what, value_top) = _MAPS[table][1:]
    where = "%s|%s" % (table, name)
    return {
        _int(key, "%s %s" % (where, key_what), 0, key_top): _int(
            value, "%s %s %s %s" % (where, key_what, key, value_what), 0, value_top
        )
        for key, value in sorted(fields.items(), key=lambda item: (len(item[0]), item[0]))
    }


def _wred(fields: dict[str, str], name: str) -> dict[str, Any]:
    where = "WRED_PROFILE|%s" % name
    profile: dict[str, Any] = {}
    for key, value in fields.items():
        if key == "ecn":
            if value not in ECN_MODES:
                raise ParseError(
                    "SONiC CONFIG_DB: %s ecn is %r, not one of %s" % (where, value, ", ".join(ECN_MODES))
                )
            profile[key] = value
        elif key.endswith("_enable"):
            if value not in ("true", "false"):
                raise ParseError("SONiC CONFIG_DB: %s %s is %r, not true or false" % (where, key, value))
            profile[key] = value == "true"
        elif key.endswith("_drop_probability"):
            profile[key] = _int(value, "%s %s" % (where, key), 0, 100)
        elif key.endswith("_threshold"):
            profile[key] = _int(value, "%s %s" % (where, key), 0, 2**63)
        else:
            profile[key] = value
    profile.setdefault("ecn", None)
    return profile


def _port(ports: dict[str, dict[str, Any]], name: str) -> dict[str, Any]:
    return ports.setdefault(
        name,
        {
            "pfc_enable": [],
            **dict.fromkeys(_PORT_MAP_FIELDS),
            **dict.fromkeys(_RESOLVED.values()),
            "mtu": None,
            "speed_mbps": None,
            "alias": None,
            "queues": {},
            "buffer_pg": {},
        },
    )


def _port_qos(fields: dict[str, str], where: str) -> dict[str, Any]:
    qos: dict[str, Any] = {}
    for field, table in _PORT_MAP_FIELDS.items():
        if field in fields:
            qos[field] = _ref(fields[field], table, "%s %s" % (where, field))
    if "pfc_enable" in fields:
        items = [item.strip() for item in fields["pfc_enable"].split(",") if item.strip()]
        priorities = [_int(item, where + " pfc_enable", 0, 7) for item in items]
        if len(set(priorities)) != len(priorities):
            raise ParseError(
                "SONiC CONFIG_DB: %s pfc_enable %r repeats a priority" % (where, fields["pfc_enable"])
            )
        qos["pfc_enable"] = sorted(priorities)
    return qos


@_guard(TOOL)
def parse_config_db(text: str) -> dict[str, Any]:
    """CONFIG_DB JSON (either layout) -> the QoS view described in the module doc."""
    document = load_json(text, ParseError, TOOL)
    if not isinstance(document, dict):
        raise ParseError("SONiC CONFIG_DB: the JSON is not an object of tables")
    tables = _tables(document)
    result: dict[str, Any] = {"ports": {}, "global": {}}
    for table, spec in _MAPS.items():
        result[spec[0]] = {key: _map(fields, table, key) for key, fields in tables[table].items()}
    result["wred_profiles"] = {key: _wred(fields, key) for key, fields in tables["WRED_PROFILE"].items()}
    ports: dict[str, dict[str, Any]] = result["ports"]

    for key, fields in tables["PORT"].items():
        where = "PORT|%s" % key
        if len(_ports(key, "PORT")) != 1:
            raise ParseError("SONiC CONFIG_DB: PORT key %r names more than one port" % key)
        port = _port(ports, key)
        if "mtu" in fields:
            port["mtu"] = _int(fields["mtu"], where + " mtu", 68, 65535)
        if "speed" in fields:
            port["speed_mbps"] = _int(fields["speed"], where + " speed", 1, 10_000_000)
        port["alias"] = fields.get("alias")
    for key, fields in tables["PORT_QOS_MAP"].items():
        where = "PORT_QOS_MAP|%s" % key
        qos = _port_qos(fields, where)
        if key == "global":
            result["global"] = qos
            continue
        for name in _ports(key, "PORT_QOS_MAP"):
            _port(ports, name).update(qos)
    for key, fields in tables["QUEUE"].items():
        names, sep, index = key.rpartition("|")
        if not sep:
            raise ParseError("SONiC CONFIG_DB: QUEUE key %r is not '<port>|<queue>'" % key)
        entry = {
            "wred_profile": _ref(fields["wred_profile"], "WRED_PROFILE", "QUEUE|%s wred_profile" % key)
            if "wred_profile" in fields
            else None,
            "scheduler": _ref(fields["scheduler"], "SCHEDULER", "QUEUE|%s scheduler" % key)
            if "scheduler" in fields
            else None,
        }
        for name in _ports(names, "QUEUE"):
            for queue in _range(index, "QUEUE|%s queue" % key, 15):
                _port(ports, name)["queues"][queue] = dict(entry)
    for key, fields in tables["BUFFER_PG"].items():
        names, sep, index = key.rpartition("|")
        if not sep:
            raise ParseError("SONiC CONFIG_DB: BUFFER_PG key %r is not '<port>|<pg>'" % key)
        profile = (
            _ref(fields["profile"], "BUFFER_PROFILE", "BUFFER_PG|%s profile" % key)
            if "profile" in fields
            else None
        )
        for name in _ports(names, "BUFFER_PG"):
            for pg in _range(index, "BUFFER_PG|%s priority group" % key, 7):
                _port(ports, name)["buffer_pg"][pg] = profile

    for port in ports.values():
        for field, resolved in _RESOLVED.items():
            port[resolved] = result[resolved].get(port[field]) if port[field] is not None else None
        port["queues"] = dict(sorted(port["queues"].items()))
        port["buffer_pg"] = dict(sorted(port["buffer_pg"].items()))
    return result


# ------------------------------------------------------------------ the lossless questions


def _port_of(qos: dict[str, Any], port: str) -> dict[str, Any]:
    if port not in qos["ports"]:
        raise KeyError("SONiC CONFIG_DB has no QoS for port %s" % port)
    found: dict[str, Any] = qos["ports"][port]
    return found


def dscp_tc(qos: dict[str, Any], port: str, dscp: int) -> int | None:
    """The traffic class ``dscp`` lands in on ``port``; None when the port has no DSCP map here
    (SONiC then puts everything in TC 0) or its map does not list ``dscp``."""
    mapping = _port_of(qos, port)["dscp_to_tc"]
    return None if mapping is None else mapping.get(dscp)


def tc_has_pfc(qos: dict[str, Any], port: str, tc: int | None) -> bool:
    """Whether ``tc`` is lossless on ``port``: PFC enabled on the priority of the same number (the
    SONiC convention the AZURE maps follow: lossless TC n uses priority group n and queue n)."""
    return tc is not None and tc in _port_of(qos, port)["pfc_enable"]


def tc_queue(qos: dict[str, Any], port: str, tc: int | None) -> int | None:
    """The egress queue of ``tc`` on ``port`` (its TC_TO_QUEUE_MAP); None when unknown."""
    mapping = _port_of(qos, port)["tc_to_queue"]
    return None if tc is None or mapping is None else mapping.get(tc)


def queue_ecn(qos: dict[str, Any], port: str, queue: int | None) -> str | None:
    """The ECN mode of ``queue``'s WRED profile on ``port`` when it marks (``ecn_all``...), else None
    (no profile, a profile not in this dump, or ``ecn_none``)."""
    if queue is None:
        return None
    entry = _port_of(qos, port)["queues"].get(queue) or {}
    profile = qos["wred_profiles"].get(entry.get("wred_profile")) or {}
    mode = profile.get("ecn")
    return None if mode in (None, "ecn_none") else str(mode)


def port_mtu(qos: dict[str, Any], port: str) -> int | None:
    """The port's MTU (PORT|<port> mtu); None when this dump does not set it."""
    mtu: int | None = _port_of(qos, port)["mtu"]
    return mtu


def dscp_path(qos: dict[str, Any], port: str, dscp: int) -> dict[str, Any]:
    """Where ``dscp`` goes on ``port``: ``{dscp, tc, queue, lossless, ecn, mtu}`` (see the helpers)."""
    tc = dscp_tc(qos, port, dscp)
    queue = tc_queue(qos, port, tc)
    return {
        "dscp": dscp,
        "tc": tc,
        "queue": queue,
        "lossless": tc_has_pfc(qos, port, tc),
        "ecn": queue_ecn(qos, port, queue),
        "mtu": port_mtu(qos, port),
    }
