# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A SONiC leaf's side of switch_qos, read-only: its CONFIG_DB in, the reading every node judges its
links by and the leaf's drift from the lossless RoCE profile out.

The action plugin ``gpufleet.node.switch_qos`` runs :data:`COMMAND` (``sonic-cfggen -d
--print-data``: CONFIG_DB as config_db.json's nested tables, what SONiC's own ``show
runningconfiguration all`` prints) over the leaf's Ansible connection (SSH) and hands the text
here; sonic_qos.parse_config_db reads it. gpufleet never changes a SONiC leaf: :func:`plan` has no
patches, and a run that would change one is refused by the action plugin (:func:`refusal`).

The reading has the NVUE leaves' shape (switch_qos.read), so the nodes judge a SONiC port with the
same judge and check names (fabric_judge.judge_switch_port: ``fabric.switch_dscp``, ``switch_pfc``,
``switch_ecn``, ``cnp_priority``, ``switch_mtu``). SONiC's objects in NVUE's words, per port
(SONiC's convention that lossless TC n is PFC priority n, sonic_qos.tc_has_pfc):

- ``mapping.trust``: ``l3`` when the port binds a DSCP_TO_TC_MAP (SONiC classifies by DSCP only
  through one), else ``none`` (everything lands in TC 0);
- ``mapping.dscp.<d>.switch-priority``: the port's DSCP_TO_TC_MAP (the NVUE switch priority is the
  SONiC traffic class);
- ``pfc.switch-priority``: the port's ``pfc_enable`` (SONiC's PFC receives and sends);
- ``egress-queue-mapping.switch-priority.<tc>.traffic-class``: the port's TC_TO_QUEUE_MAP (the NVUE
  traffic class is the SONiC egress queue);
- ``congestion-control.traffic-class.<queue>.ecn``: ``enable`` when the queue's WRED_PROFILE marks
  (any ``ecn`` but ``ecn_none``);
- ``mtu``: PORT's ``mtu``.

``qos`` holds the view most ports share and ``port_qos`` only the ports that differ from it, so a
uniform leaf's reading stays as small as an NVUE one. A port is listed under its name
(``Ethernet0``) and, when it has one, its alias: SONiC's lldpmgrd advertises the alias as the LLDP
port id, which is what the nodes hear and the cabling plans name.

Pure (no I/O); runs on the controller (in the action plugin) and in the unit tests.
"""

from __future__ import annotations

import json

from ansible_collections.gpufleet.node.plugins.module_utils.core.results import change
from ansible_collections.gpufleet.node.plugins.module_utils.fabric import sonic_qos
from ansible_collections.gpufleet.node.plugins.module_utils.fabric.fabric_judge import leaf_read

COMMAND = "sonic-cfggen -d --print-data"
# The inventory setting that says a leaf's OS, and the OSes gpufleet reads.
OS_SETTING = "gpufleet_switch_os"
OS_CHOICES = ("cumulus", "sonic")
PROFILE = "default-global"


def os_errors(value):
    """The input error of the leaf's OS setting; [] when it is one gpufleet reads."""
    if value in OS_CHOICES:
        return []
    return [
        "os (%s) is %r; allowed: %s (cumulus: read and configured over NVUE's REST API; sonic: read "
        "over SSH with %s, never changed)" % (OS_SETTING, value, ", ".join(OS_CHOICES), COMMAND)
    ]


def _sorted_ports(names):
    return sorted(names, key=lambda n: (n.rstrip("0123456789"), len(n), n))


def port_view(qos, port):
    """One SONiC port's QoS as the NVUE ``qos`` subtree fabric_judge judges (see the module doc)."""
    entry = qos["ports"][port]
    dscp_map = entry["dscp_to_tc"] if entry["dscp_to_tc_map"] is not None else None
    tc_queue = entry["tc_to_queue"] or {}
    queues = {}
    for queue in entry["queues"]:
        queues[str(queue)] = {"ecn": "enable" if sonic_qos.queue_ecn(qos, port, queue) else "disable"}
    return {
        "mapping": {
            PROFILE: {
                "trust": "l3" if dscp_map is not None else "none",
                "dscp": {str(d): {"switch-priority": tc} for d, tc in (dscp_map or {}).items()},
            }
        },
        "pfc": {
            PROFILE: {
                "switch-priority": {str(p): {} for p in entry["pfc_enable"]},
                "rx": "enable",
                "tx": "enable",
            }
        },
        "egress-queue-mapping": {
            PROFILE: {"switch-priority": {str(tc): {"traffic-class": q} for tc, q in tc_queue.items()}}
        },
        "congestion-control": {PROFILE: {"traffic-class": queues}},
    }


def _names(qos, port):
    """The names the nodes may know ``port`` by: its own and its alias (lldpmgrd's LLDP port id)."""
    alias = qos["ports"][port]["alias"]
    return [port] + ([alias] if alias and alias != port else [])


def reading_of(qos, name):
    """The reading (switch_qos.read's shape) of a parsed CONFIG_DB: ``{name, read, error, kind, os,
    qos, port_qos, mtu}``."""
    ports = _sorted_ports(qos["ports"])
    views = {port: port_view(qos, port) for port in ports}
    counts = {}
    for view in views.values():
        key = json.dumps(view, sort_keys=True)
        counts[key] = counts.get(key, 0) + 1
    common = json.loads(max(counts, key=lambda k: counts[k])) if counts else {}
    port_qos, mtu = {}, {}
    for port in ports:
        for known_as in _names(qos, port):
            mtu[known_as] = sonic_qos.port_mtu(qos, port)
            if views[port] != common:
                port_qos[known_as] = views[port]
    return {
        "name": name,
        "read": True,
        "error": None,
        "kind": None,
        "os": "sonic",
        "qos": common,
        "port_qos": port_qos,
        "mtu": mtu,
    }


def unread(name, error, kind):
    """The reading of a leaf that could not be read: every node cabled to it names the error."""
    return {
        "name": name,
        "read": False,
        "error": error,
        "kind": kind,
        "os": "sonic",
        "qos": {},
        "port_qos": {},
        "mtu": {},
    }


def reading_check(reading):
    """``switch.sonic[<name>]``: the leaf's CONFIG_DB was read (what every link check needs)."""
    said = "%s: SONiC CONFIG_DB read (%s)" % (reading["name"], COMMAND)
    return leaf_read("switch.sonic[%s]" % reading["name"], reading, said)


def planned(reading):
    """:func:`plan`'s answer around ``reading``, before the leaf's drift is compared."""
    return {
        "reading": reading,
        "changes": [],
        "patches": {},
        "errors": [],
        "checks": [reading_check(reading)],
    }


def unread_plan(name, error, kind):
    """:func:`plan`'s answer for a leaf that could not be read (no answer, an error, unreadable text)."""
    return planned(unread(name, error, kind))


def _pfc_text(priorities):
    return ",".join(str(p) for p in priorities)


def _port_changes(qos, port, params, seen):
    """What differs from the profile on one port, as SONiC's CONFIG_DB objects (``TABLE|key field``);
    a shared map's entry is named once (``seen``)."""
    entry = qos["ports"][port]
    manage = params["manage"]
    out = []

    def add(setting, before, after):
        if setting not in seen:
            seen.add(setting)
            out.append(change(setting, before, after))

    if "dscp_map" in manage:
        dscps = ((params["roce_dscp"], params["roce_priority"]), (params["cnp_dscp"], params["cnp_priority"]))
        _map_changes(add, port, entry, "dscp_to_tc", dscps, "%d -> TC %d")
        queues = (
            (params["roce_priority"], params["roce_traffic_class"]),
            (params["cnp_priority"], params["cnp_traffic_class"]),
        )
        _map_changes(add, port, entry, "tc_to_queue", queues, "TC %d -> queue %d")
    if "pfc" in manage and params["roce_priority"] not in entry["pfc_enable"]:
        add(
            "PORT_QOS_MAP|%s pfc_enable" % port,
            _pfc_text(entry["pfc_enable"]),
            _pfc_text(sorted(set(entry["pfc_enable"]) | {params["roce_priority"]})),
        )
    if "ecn" in manage:
        queue = params["roce_traffic_class"]
        if sonic_qos.queue_ecn(qos, port, queue) is None:
            add(
                "QUEUE|%s|%d wred_profile" % (port, queue),
                (entry["queues"].get(queue) or {}).get("wred_profile"),
                "a WRED_PROFILE that marks ECN",
            )
    if "mtu" in manage and entry["mtu"] != params["mtu"]:
        add("PORT|%s mtu" % port, entry["mtu"], params["mtu"])
    return out


def _map_changes(add, port, entry, kind, wanted, pair):
    """What differs from ``wanted`` (``(key, value)`` pairs, each shown as ``pair``) in the port's
    ``kind`` map (``dscp_to_tc``: DSCP_TO_TC_MAP, ``tc_to_queue``: TC_TO_QUEUE_MAP); a port bound to
    none is named on PORT_QOS_MAP."""
    table, values = kind.upper() + "_MAP", entry[kind]
    if values is None:
        described = "a %s with %s" % (table, ", ".join(pair % p for p in wanted))
        add("PORT_QOS_MAP|%s %s_map" % (port, kind), entry[kind + "_map"], described)
        return
    for key, value in wanted:
        if values.get(key) != value:
            add("%s|%s %d" % (table, entry[kind + "_map"], key), values.get(key), value)


def plan(text, params, name):
    """CONFIG_DB text -> ``{reading, changes, patches, checks, errors}`` (what the action plugin returns):
    the changes are what an operator would set in CONFIG_DB for the profile (gpufleet sets none),
    ``errors`` a port in ``ports`` the leaf does not have. Text SONiC would not have printed gives
    an unread leaf (a failed ``switch.sonic`` check), as an unreachable one does."""
    try:
        qos = sonic_qos.parse_config_db(text)
    except sonic_qos.ParseError as exc:
        return unread_plan(
            name, "%s: %s printed what gpufleet cannot read: %s" % (name, COMMAND, exc), "parse"
        )
    result = planned(reading_of(qos, name))
    known = {}
    for port in qos["ports"]:
        for known_as in _names(qos, port):
            known[known_as] = port
    missing = [p for p in params["ports"] if p not in known]
    if missing:
        have = _sorted_ports(qos["ports"])
        shown = ", ".join(have[:4]) + (" ... %s" % have[-1] if len(have) > 4 else "")
        result["errors"] = [
            "ports (switch_qos_ports) names %s, which %s does not have; its %d ports are %s"
            % (", ".join(missing), name, len(have), shown or "none")
        ]
        return result
    ports = [known[p] for p in params["ports"]] or _sorted_ports(qos["ports"])
    seen = set()
    for port in ports:
        result["changes"].extend(_port_changes(qos, port, params, seen))
    return result


def refusal(name, changes):
    """Why a run that would change a SONiC leaf is refused (the message of its failed task)."""
    return (
        "%s runs SONiC (%s: sonic), which gpufleet reads and never changes; it differs from the "
        "lossless RoCE profile in %d setting(s) (%s): set them in its CONFIG_DB with SONiC's own tools "
        "(config qos reload, config interface mtu, or its config_db.json), then run gpufleet again"
        % (
            name,
            OS_SETTING,
            len(changes),
            ", ".join(c["setting"] for c in changes[:6]) + (", ..." if len(changes) > 6 else ""),
        )
    )
