# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fabric role, once: each RoCE port's cabling and its leaf's side of the link (validate, plan).

It changes nothing on the node (``plan`` only; the leaf's settings are the switch_qos role's). Per
RoCE port (every mlx5 Ethernet port, in device order), in one read of ``lldpctl -f json0``:

- ``fabric.neighbor[<ibdev>]`` when the cabling plan (``cabling``: ibdev -> ``leaf02:swp14``) names
  the port: LLDP's neighbour against it;
- the link's leaf side (fabric_judge.judge_switch_port) against the leaf's reading, taken once per
  run on the controller by switch_qos (``switches``: name -> its reading; a SONiC leaf's ``port_qos``
  holds the ports whose QoS differs from its ``qos``), for the leaf
  and port LLDP hears (or the plan's when LLDP hears nothing);
- ``fabric.switch_read[<leaf>]`` when a leaf the links need was not read (down, refused, or left
  out of the run): fail closed, a link that cannot be seen is not a good link.

The host's side (``host``: RoCE DSCP, CNP DSCP, PFC priority, MTU) is the rdma_link and rdma_qos
roles' own settings (roles/fabric/vars/main.yml), so both ends are judged against one profile.
Runs on the node (Python 3.11, stdlib only).
"""

from __future__ import annotations

from ansible_collections.gpufleet.node.plugins.module_utils.core.plan_node import RoleFailed
from ansible_collections.gpufleet.node.plugins.module_utils.core.results import check, hint
from ansible_collections.gpufleet.node.plugins.module_utils.core.role_plan import FailedChecks, Plan
from ansible_collections.gpufleet.node.plugins.module_utils.fabric.fabric_judge import (
    judge_neighbor,
    judge_switch_port,
    link_label,
    name_swapped_pairs,
)
from ansible_collections.gpufleet.node.plugins.module_utils.fabric.lldp import TOOL, ParseError, parse_lldpctl
from ansible_collections.gpufleet.node.plugins.module_utils.rdma.rdma_read import read_ib_port
from ansible_collections.gpufleet.node.plugins.module_utils.rdma.rdma_roles import port_names

MODULE = "fabric"

ARGUMENT_SPEC = dict(
    node=dict(type="str", required=True),
    cabling=dict(type="dict", default={}),
    switches=dict(type="dict", default={}),
    host=dict(
        type="dict",
        required=True,
        options=dict(
            roce_dscp=dict(type="int", required=True),
            cnp_dscp=dict(type="int", required=True),
            priority=dict(type="int", required=True),
            mtu=dict(type="int", required=True),
        ),
    ),
)

# A link that failed is named in the result's msg; the role's task fails on it (its failed_when).
FAILED_CHECKS = FailedChecks(prefix="fabric: ", fail=False)

_LIMITS = {"roce_dscp": range(64), "cnp_dscp": range(64), "priority": range(8), "mtu": range(68, 65537)}


def _planned(value):
    parts = value.split(":") if isinstance(value, str) else []
    return len(parts) == 2 and all(parts)


def validate(node, params):
    """Bad cabling entries and host values, named with the allowed form, before anything is read."""
    errors = [
        "cabling[%s] is %r; give the switch and its port as leaf02:swp14" % (ibdev, value)
        for ibdev, value in sorted(params["cabling"].items())
        if not _planned(value)
    ]
    for key, allowed in _LIMITS.items():
        if params["host"][key] not in allowed:
            value = params["host"][key]
            errors.append("host.%s is %s; allowed %d..%d" % (key, value, allowed[0], allowed[-1]))
    if errors:
        raise RoleFailed("; ".join(errors), input_error=True)


def roce_ports():
    """``[(ibdev, netdev, active)]``: every mlx5 port whose link layer is Ethernet, in device order."""
    ports = []
    for ibdev, entry in port_names().items():
        info = read_ib_port(ibdev, entry["port"])
        if entry["netdev"] and info["link_layer"] == "Ethernet":
            ports.append((ibdev, entry["netdev"], info.get("state") == "ACTIVE"))
    return ports


def read_neighbours(node):
    """lldpctl's neighbours per interface; RoleFailed naming the tool when it is absent or unreadable."""
    path = node.get_bin_path(TOOL)
    if not path:
        raise RoleFailed(
            "%s is not installed: the cabling cannot be checked (install lldpd and start it)" % TOOL,
            checks=[check("fabric.lldp", False, "missing", "lldpd running", "", "%s not found" % TOOL)],
        )
    rc, out, err = node.run_command([path, "-f", "json0"])
    if rc != 0:
        raise RoleFailed("%s -f json0 failed (rc %d): %s (is lldpd running?)" % (TOOL, rc, err.strip()))
    try:
        return parse_lldpctl(out)
    except ParseError as exc:
        raise RoleFailed(str(exc)) from None


def _far_end(neighbour, planned):
    """(leaf, port) the link goes to: what LLDP hears, else the cabling plan's, else (None, None)."""
    if neighbour and neighbour.get("chassis_name") and neighbour.get("port_id"):
        return neighbour["chassis_name"], neighbour["port_id"]
    if planned:
        return tuple(planned.split(":", 1))
    return None, None


def _unread(name, reading):
    why = (reading or {}).get("error") or "it was not read in this run (is it in this run's --limit?)"
    return check(
        "fabric.switch_read[%s]" % name,
        False,
        "unread",
        "read",
        "",
        "%s: its side of this node's links cannot be judged: %s" % (name, why),
    )


def _cabled_ports_exist(cabling, ports):
    """Every device the cabling plan names is a RoCE port of this node: a plan for a port the node
    lacks (a typo, another node's plan) is a configuration error, not a link left unjudged."""
    have = [ibdev for ibdev, _netdev, _active in ports]
    missing = sorted(set(cabling) - set(have))
    if missing:
        raise RoleFailed(
            "fabric_cabling names %s, which this node does not have as a RoCE port (its RoCE ports: %s)"
            % (", ".join(missing), ", ".join(have) or "none"),
            input_error=True,
        )


def plan(node, params):
    """Read the node's RoCE ports and LLDP once and judge every link; writes nothing.

    Returns a Plan with no changes (and no word on reboots: the role only judges)."""
    cabling, switches, host = params["cabling"], params["switches"], params["host"]
    ports = roce_ports()
    _cabled_ports_exist(cabling, ports)
    if not ports or not (cabling or switches):
        return Plan(reboot_required=None)
    heard = read_neighbours(node)
    checks, hints, unread, unmanaged = [], [], {}, set()
    down = [ibdev for ibdev, _netdev, active in ports if not active]
    if down:
        # a port without link hears no LLDP and carries nothing: rdma_link.link_state names it
        hints.append(hint("%s: link down, cabling and leaf not judged until it is up" % ", ".join(down)))
    for ibdev, netdev, active in ports:
        if not active:
            continue
        neighbour = (heard.get(netdev) or [None])[0]
        planned = cabling.get(ibdev)
        if planned:
            checks.append(judge_neighbor(ibdev, planned, neighbour))
        leaf, port = _far_end(neighbour, planned)
        if leaf is None:
            continue
        if leaf not in switches:
            unmanaged.add(leaf)
            continue
        reading = switches[leaf]
        if not reading or not reading.get("read"):
            unread.setdefault(leaf, _unread(leaf, reading))
            continue
        interface = {"link": {"mtu": (reading.get("mtu") or {}).get(port)}}
        # a SONiC leaf's ports may differ (module_utils/fabric/sonic_leaf.py: port_qos, the ones that do)
        qos = (reading.get("port_qos") or {}).get(port, reading["qos"])
        checks.extend(judge_switch_port(link_label(params["node"], ibdev, leaf, port), host, qos, interface))
    name_swapped_pairs([c for c in checks if c["name"].startswith("fabric.neighbor[")])
    checks.extend(unread[name] for name in sorted(unread))
    if unmanaged and switches:
        hints.append(
            hint(
                "%s: not read for this node (not in leaf_switches, or not a leaf of its cabling plan), so "
                "the switch side of its links is not checked" % ", ".join(sorted(unmanaged))
            )
        )
    return Plan(checks=checks, hints=hints, reboot_required=None)


def apply(node, params, planned):
    """Nothing: the role only judges (its plan's checks are the verdicts, in and out of check mode)."""
    return planned


def result(node, params, planned):
    """No return values of its own beyond the checks and hints."""
    return {}


def diff(node, params, planned):
    """Nothing changes, so no diff."""
    return None
