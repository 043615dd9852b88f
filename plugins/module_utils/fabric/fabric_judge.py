# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The verdicts on a RoCE link end to end: is the port cabled where the plan says, and does its leaf
carry the host's RoCE traffic losslessly (pure; the readings come from lldpctl and NVUE).

A host that is perfect still stalls if its switch port drops RoCE traffic: the incident this toolkit
exists for was PFC and ECN off *on the switch*. For one link (a host RoCE port and the leaf port LLDP
says it is cabled to) these judge, each as a check naming both ends (``node01:mlx5_3 ->
leaf02:swp14``) with the host's value as the limit and the switch's as the value:

- ``fabric.neighbor[<ibdev>]``: LLDP's neighbour is the planned switch and port (cabling plans name
  them ``leaf02:swp14``); no neighbour at all fails too; two ports each on the other's planned port
  are named as one crossed pair (name_swapped_pairs);
- ``fabric.switch_dscp[...]``: the leaf trusts DSCP and maps the host's RoCE DSCP (ToS 106 -> 26) to
  the host's PFC priority (a DSCP mapped elsewhere lands in a lossy class);
- ``fabric.switch_pfc[...]``: the leaf has PFC on that priority, receiving and sending pauses;
- ``fabric.switch_ecn[...]``: the traffic class that priority egresses in is ECN-marked (without
  marks, DCQCN never slows a sender and pauses spread instead);
- ``fabric.cnp_priority[...]``: the host's CNP DSCP (48) lands on a priority of its own, not in the
  RoCE queue behind the congestion it reports;
- ``fabric.switch_mtu[...]``: the leaf port's MTU is at least the host's.

:func:`leaf_read` is the verdict on a leaf's own reading (switch_qos's ``switch.nvue``, sonic_leaf's
``switch.sonic``): was it read at all, which every link check through it needs.

The switch side is NVUE's ``qos`` subtree and the port's ``interface`` subtree as Cumulus Linux
shows them (``nv show qos``; module_utils/mgmt/nvue_client.py reads them, sim/nvue_state.py simulates
them): ``mapping.default-global.{trust, dscp.<d>.switch-priority}``, ``pfc.default-global.
{switch-priority.<p>, rx, tx}``, ``egress-queue-mapping.default-global.switch-priority.<p>.
traffic-class``, ``congestion-control.default-global.traffic-class.<tc>.ecn``, ``link.mtu``.

Stdlib only.
"""

from __future__ import annotations

from ansible_collections.gpufleet.node.plugins.module_utils.core.results import check

PROFILE = "default-global"
# NVUE's trust modes that read DSCP ("l2" reads only PCP, so DSCP marks are ignored)
_DSCP_TRUST = ("l3", "both")
_ON = ("on", "enable", "enabled", True)


def leaf_read(name, reading, said):
    """The check ``name`` that a leaf's ``reading`` (``{read, kind, error}``) was read: ``said`` when it
    was, else the reading's error, with the kind of failure as its value."""
    return check(
        name,
        reading["read"],
        "read" if reading["read"] else reading["kind"],
        "read",
        "",
        said if reading["read"] else reading["error"],
    )


def link_label(node, ibdev, switch, port):
    """``node01:mlx5_3 -> leaf02:swp14``: both ends of a link, as every fabric check names them."""
    return "%s:%s -> %s:%s" % (node, ibdev, switch, port)


def judge_neighbor(ibdev, expected, neighbour):
    """``expected`` "leaf02:swp14" (the cabling plan) against lldp's neighbour (or None)."""
    found = "%s:%s" % (neighbour.get("chassis_name"), neighbour.get("port_id")) if neighbour else None
    if found is None:
        message = "%s hears no LLDP neighbour; the plan cables it to %s (check the cable and lldpd)" % (
            ibdev,
            expected,
        )
    elif found != expected:
        message = "%s is cabled to %s, the plan says %s (a swapped or misplaced cable)" % (
            ibdev,
            found,
            expected,
        )
    else:
        message = "%s is cabled to %s as planned" % (ibdev, expected)
    return check("fabric.neighbor[%s]" % ibdev, found == expected, found, expected, "", message)


def name_swapped_pairs(neighbor_checks):
    """Two ports each cabled where the plan puts the other are one crossed pair, not two misplaced
    cables: their fabric.neighbor checks say so, naming the other port (changed in place; returned)."""
    failed = [c for c in neighbor_checks if not c["ok"] and c["value"] is not None]
    for one in failed:
        crossed = [
            c for c in failed if c is not one and (c["value"], c["limit"]) == (one["limit"], one["value"])
        ]
        if crossed:
            other = crossed[0]
            one["message"] = "%s is cabled to %s, the plan says %s: crossed with %s (swap the two cables)" % (
                _port_of(one),
                one["value"],
                one["limit"],
                _port_of(other),
            )
    return neighbor_checks


def _port_of(neighbor_check):
    return neighbor_check["name"][len("fabric.neighbor[") : -1]


def _profile(qos, branch):
    node = (qos.get(branch) or {}).get(PROFILE)
    return node if isinstance(node, dict) else {}


def _int(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def switch_priority(qos, dscp):
    """The switch priority a DSCP maps to on this leaf (None when the map has no entry)."""
    entry = (_profile(qos, "mapping").get("dscp") or {}).get(str(dscp))
    return _int(entry.get("switch-priority")) if isinstance(entry, dict) else None


def pfc_priorities(qos):
    """The switch priorities with PFC on, when PFC both receives and sends pauses (else none)."""
    pfc = _profile(qos, "pfc")
    if pfc.get("rx", "enable") not in _ON or pfc.get("tx", "enable") not in _ON:
        return []
    members = pfc.get("switch-priority") or {}
    return sorted(p for p in (_int(k) for k in members) if p is not None)


def traffic_class(qos, priority):
    entry = (_profile(qos, "egress-queue-mapping").get("switch-priority") or {}).get(str(priority))
    return _int(entry.get("traffic-class")) if isinstance(entry, dict) else None


def ecn_marked(qos, tc):
    entry = (_profile(qos, "congestion-control").get("traffic-class") or {}).get(str(tc))
    return isinstance(entry, dict) and entry.get("ecn") in _ON


def judge_switch_port(label, host, qos, interface):
    """The leaf side of one link against the host's: ``host`` is ``{roce_dscp, cnp_dscp, priority,
    mtu}`` (the RoCE PFC priority, 3 on the reference deployment); ``qos`` and ``interface`` are the
    leaf's NVUE subtrees. Returns the five checks, each naming both ends."""
    priority, roce_dscp, cnp_dscp = host["priority"], host["roce_dscp"], host["cnp_dscp"]
    trust = _profile(qos, "mapping").get("trust")
    roce_sp = switch_priority(qos, roce_dscp) if trust in _DSCP_TRUST else None
    sp_text = "trust %s" % trust if trust not in _DSCP_TRUST else "priority %s" % roce_sp
    pfc = pfc_priorities(qos)
    tc = traffic_class(qos, priority)
    cnp_sp = switch_priority(qos, cnp_dscp) if trust in _DSCP_TRUST else None
    mtu = _int(((interface or {}).get("link") or {}).get("mtu"))
    marked = tc is not None and ecn_marked(qos, tc)
    return [
        check(
            "fabric.switch_dscp[%s]" % label,
            roce_sp == priority,
            sp_text,
            "priority %d" % priority,
            "",
            "%s: the switch puts the host's RoCE DSCP %d on %s, the host sends it on PFC priority %d%s"
            % (label, roce_dscp, sp_text, priority, "" if roce_sp == priority else " (a lossy class)"),
        ),
        check(
            "fabric.switch_pfc[%s]" % label,
            priority in pfc,
            pfc,
            [priority],
            "",
            "%s: the switch has PFC on priorities %s, the host on %d"
            % (label, ", ".join(map(str, pfc)) or "none", priority),
        ),
        check(
            "fabric.switch_ecn[%s]" % label,
            marked,
            "traffic class %s %s" % (tc, "ECN-marked" if marked else "unmarked"),
            "ECN-marked",
            "",
            "%s: priority %d egresses in traffic class %s, which the switch %s"
            % (
                label,
                priority,
                tc,
                "ECN-marks" if marked else "does not ECN-mark (no DCQCN)",
            ),
        ),
        check(
            "fabric.cnp_priority[%s]" % label,
            cnp_sp is not None and cnp_sp != roce_sp,
            cnp_sp,
            "a priority other than RoCE's %s" % roce_sp,
            "",
            "%s: the switch puts CNPs (DSCP %d) on priority %s, RoCE on %s"
            % (label, cnp_dscp, cnp_sp, roce_sp),
        ),
        check(
            "fabric.switch_mtu[%s]" % label,
            mtu is not None and mtu >= host["mtu"],
            mtu,
            host["mtu"],
            "bytes",
            "%s: switch port MTU %s, host MTU %d" % (label, mtu, host["mtu"]),
        ),
    ]
