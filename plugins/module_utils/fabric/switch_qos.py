# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lossless RoCE profile of a Cumulus Linux leaf, once: validate -> plan (read) -> apply.

The switch side of the incident this toolkit exists for (PFC and ECN off on the switch). The
profile is what the hosts' rdma_link and rdma_qos roles send: RoCE on DSCP 26 (ToS 106) with PFC
on priority 3, CNPs on DSCP 48 on a priority of their own, ECN marking on RoCE's traffic class,
and front-panel ports whose MTU carries the hosts' frames. As NVUE paths (``nv set`` syntax in
NVIDIA's "RDMA over Converged Ethernet" and "Quality of Service" pages of the Cumulus Linux 5.x
user guide; ``default-global`` is the profile every port uses unless given another):

- ``qos/mapping/default-global``: ``trust`` ``both`` (PCP and DSCP, as ``nv set qos roce`` sets it)
  and ``dscp/<d>/switch-priority`` for the RoCE and CNP DSCPs;
- ``qos/pfc/default-global``: ``switch-priority/<p>`` (a set member), ``rx``/``tx`` ``enable``;
- ``qos/egress-queue-mapping/default-global/switch-priority/<p>/traffic-class``;
- ``qos/congestion-control/default-global/traffic-class/<tc>/ecn`` ``enable``;
- ``interface/<swp>/link/mtu``.

``plan`` reads the applied configuration once (module_utils/mgmt/nvue_client.py caches a subtree per
run) and returns ``{changes, patches, reading}``; ``reading`` is what the nodes' fabric role
judges each link against (the operational ``qos`` tree and each port's MTU), so a switch is read
once per run however many host ports are cabled to it. ``apply`` sends the patches through one
NVUE revision (create, patch, apply) and reads the switch again.

A leaf whose inventory says ``gpufleet_switch_os: sonic`` is read, never changed, by
module_utils/fabric/sonic_leaf.py (the action plugin reads its CONFIG_DB over SSH); ``os`` and its
check are here so that both kinds of leaf are refused the same way.

Runs on the controller (the switches' management network); stdlib and ansible.module_utils only.
"""

from __future__ import annotations

from ansible_collections.gpufleet.node.plugins.module_utils.core.results import check
from ansible_collections.gpufleet.node.plugins.module_utils.fabric.sonic_leaf import os_errors
from ansible_collections.gpufleet.node.plugins.module_utils.mgmt.nvue_client import NvueError, client_for

PROFILE = "default-global"
SETTINGS = ("trust", "dscp_map", "pfc", "ecn", "mtu")

ARGUMENT_SPEC = dict(
    name=dict(type="str"),
    os=dict(type="str", default="cumulus"),
    address=dict(type="str"),
    username=dict(type="str"),
    password=dict(type="str", no_log=True),
    ca_path=dict(type="path"),
    validate_certs=dict(type="bool", default=True),
    insecure_http_reason=dict(type="str"),
    timeout=dict(type="int", default=10),
    roce_dscp=dict(type="int", default=26),
    cnp_dscp=dict(type="int", default=48),
    roce_priority=dict(type="int", default=3),
    cnp_priority=dict(type="int", default=6),
    roce_traffic_class=dict(type="int", default=3),
    cnp_traffic_class=dict(type="int", default=6),
    mtu=dict(type="int", default=9216),
    ports=dict(type="list", elements="str", default=[]),
    manage=dict(type="list", elements="str", default=list(SETTINGS), choices=list(SETTINGS)),
)

# setting -> (allowed range, what it is)
_RANGES = {
    "roce_dscp": (range(64), "a DSCP"),
    "cnp_dscp": (range(64), "a DSCP"),
    "roce_priority": (range(8), "a switch priority"),
    "cnp_priority": (range(8), "a switch priority"),
    "roce_traffic_class": (range(8), "a traffic class"),
    "cnp_traffic_class": (range(8), "a traffic class"),
    "mtu": (range(552, 9217), "an MTU in bytes"),
    "timeout": (range(1, 601), "seconds"),
}


def validate(params):
    """The errors of ``params`` (each naming the option and the allowed range); [] when good."""
    errors = os_errors(params["os"])
    if params["os"] == "cumulus":
        errors.extend(
            "%s (gpufleet_switch_%s) is required for a Cumulus leaf (NVUE's REST API)" % (key, key)
            for key in ("address", "username", "password")
            if not params[key]
        )
    for name, (allowed, what) in _RANGES.items():
        if params[name] not in allowed:
            errors.append("%s is %s; %s is %s..%s" % (name, params[name], what, allowed[0], allowed[-1]))
    if params["roce_dscp"] == params["cnp_dscp"]:
        errors.append("cnp_dscp and roce_dscp are both %d; CNPs need their own DSCP" % params["cnp_dscp"])
    if params["roce_priority"] == params["cnp_priority"]:
        errors.append(
            "cnp_priority and roce_priority are both %d; CNPs must not queue behind RoCE"
            % params["cnp_priority"]
        )
    return errors


def client(params, name):
    return client_for(
        params["address"],
        params["username"],
        params["password"],
        name=name,
        ca_path=params["ca_path"],
        validate_certs=params["validate_certs"],
        timeout=params["timeout"],
        insecure_http_reason=params["insecure_http_reason"],
    )


def patches(params, ports):
    """``{NVUE path: body}`` of the profile for the settings ``manage`` names, on ``ports``."""
    manage = params["manage"]
    out = {}
    mapping = {}
    if "trust" in manage:
        # Cumulus' own RoCE profile (``nv set qos roce``) trusts both PCP and DSCP
        mapping["trust"] = "both"
    if "dscp_map" in manage:
        mapping["dscp"] = {
            str(params["roce_dscp"]): {"switch-priority": params["roce_priority"]},
            str(params["cnp_dscp"]): {"switch-priority": params["cnp_priority"]},
        }
        out["qos/egress-queue-mapping/%s/switch-priority" % PROFILE] = {
            str(params["roce_priority"]): {"traffic-class": params["roce_traffic_class"]},
            str(params["cnp_priority"]): {"traffic-class": params["cnp_traffic_class"]},
        }
    if mapping:
        out["qos/mapping/%s" % PROFILE] = mapping
    if "pfc" in manage:
        out["qos/pfc/%s" % PROFILE] = {
            "switch-priority": {str(params["roce_priority"]): {}},
            "rx": "enable",
            "tx": "enable",
        }
    if "ecn" in manage:
        out["qos/congestion-control/%s/traffic-class/%d" % (PROFILE, params["roce_traffic_class"])] = {
            "ecn": "enable"
        }
    if "mtu" in manage:
        for port in ports:
            out["interface/%s/link" % port] = {"mtu": params["mtu"]}
    return out


def _front_panel(interfaces):
    return sorted(
        (n for n, i in interfaces.items() if isinstance(i, dict) and i.get("type") == "swp"),
        key=lambda n: (len(n), n),
    )


# The parts of the qos tree the nodes judge a link by (module_utils/fabric/fabric_judge.py): the rest (traffic
# pools, the scheduler, NVUE's RoCE summary) stays on the controller, so each node's arguments stay small.
_JUDGED = {
    "mapping": ("trust", "dscp"),
    "pfc": ("switch-priority", "rx", "tx"),
    "egress-queue-mapping": ("switch-priority",),
    "congestion-control": ("traffic-class",),
}


def judged_qos(qos):
    """``qos`` cut down to the ``default-global`` keys a link is judged by."""
    out = {}
    for branch, keys in _JUDGED.items():
        profile = (qos.get(branch) or {}).get(PROFILE)
        if isinstance(profile, dict):
            out[branch] = {PROFILE: {k: profile[k] for k in keys if k in profile}}
    tcs = ((out.get("congestion-control") or {}).get(PROFILE) or {}).get("traffic-class")
    if isinstance(tcs, dict):
        out["congestion-control"][PROFILE]["traffic-class"] = {
            tc: {"ecn": v.get("ecn")} for tc, v in tcs.items() if isinstance(v, dict)
        }
    return out


def read(nvue, name):
    """What the nodes judge their links against: ``{name, read, error, qos, mtu: {port: mtu}}``.

    A switch that cannot be read gives ``read: false`` and the error (never the password), so
    every node cabled to it names it instead of judging a link it cannot see."""
    try:
        qos = nvue.read_qos("operational")
        interfaces = nvue.read_interfaces("operational")
    except NvueError as exc:
        return {"name": name, "read": False, "error": str(exc), "kind": exc.kind, "qos": {}, "mtu": {}}
    mtu = {}
    for port in _front_panel(interfaces):
        value = (interfaces[port].get("link") or {}).get("mtu")
        mtu[port] = value if isinstance(value, int) else None
    return {"name": name, "read": True, "error": None, "kind": None, "qos": judged_qos(qos), "mtu": mtu}


def reading_check(reading):
    """``switch.nvue[<name>]``: the switch answered its NVUE API (what every link check needs)."""
    return check(
        "switch.nvue[%s]" % reading["name"],
        reading["read"],
        "read" if reading["read"] else reading["kind"],
        "read",
        "",
        "%s: NVUE API read" % reading["name"] if reading["read"] else reading["error"],
    )


def unknown_ports(params, interfaces, name):
    """The input errors of ``ports`` against the leaf's interface tree: a port it does not have
    would be refused by NVUE (HTTP 400) after a revision was made, so it is refused here first."""
    missing = [p for p in params["ports"] if p not in interfaces]
    if not missing:
        return []
    have = _front_panel(interfaces)
    shown = ", ".join(have[:4]) + (" ... %s" % have[-1] if len(have) > 4 else "")
    return [
        "ports (switch_qos_ports) names %s, which %s does not have; its %d front-panel ports are %s"
        % (", ".join(missing), name, len(have), shown or "none")
    ]


def plan(nvue, params, name):
    """Read the switch once, compare the profile with its applied configuration; writes nothing.

    Returns ``{reading, changes, patches, checks, errors}``; a switch that cannot be read has no
    changes and a failed ``switch.nvue`` check; ``errors`` are input errors found against what
    was read (a port the switch does not have), and with them nothing is planned."""
    reading = read(nvue, name)
    result = {
        "reading": reading,
        "changes": [],
        "patches": {},
        "checks": [reading_check(reading)],
        "errors": [],
    }
    if not reading["read"]:
        return result
    try:
        interfaces = nvue.read_interfaces("applied")
        result["errors"] = unknown_ports(params, interfaces, name)
        if result["errors"]:
            return result
        ports = params["ports"] or _front_panel(interfaces)
        wanted = patches(params, ports)
        result["changes"] = nvue.plan(wanted)
    except NvueError as exc:
        reading.update(read=False, error=str(exc), kind=exc.kind)
        result["checks"] = [reading_check(reading)]
        return result
    result["patches"] = wanted
    return result


def diff(changes, name):
    """Ansible's diff of ``changes`` (each setting from, then to), headed by the switch's name."""
    before = "".join("%s: %s\n" % (c["setting"], c["from"]) for c in changes)
    after = "".join("%s: %s\n" % (c["setting"], c["to"]) for c in changes)
    return dict(before=before, after=after, before_header=name, after_header=name)


def apply(nvue, params, name, planned):
    """Apply what differs through one revision, then read the switch again: returns the new plan
    with the changes made, the revision, and ``left`` (what still differs: the switch did not
    take a value)."""
    if not planned["changes"]:
        return dict(planned, revision=None, left=[])
    outcome = nvue.apply(planned["patches"])
    nvue.forget()
    after = plan(nvue, params, name)
    return dict(after, changes=outcome["changes"], revision=outcome["revision"], left=after["changes"])
