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

The role interface of core/role_plan.py (plugins/modules/switch_qos.py is core/role_module.py's
``run`` over this file): ``plan`` reads the applied configuration once (module_utils/mgmt/nvue_client.py
caches a subtree per run) and returns a Plan (the changes; its state: the NVUE client, the ``patches``
and the ``reading``); ``reading`` is what the nodes' fabric role judges each link against (the
operational ``qos`` tree and each port's MTU), so a switch is read once per run however many host
ports are cabled to it. ``apply`` sends the patches through one NVUE revision (create, patch, apply)
and reads the switch again.

A leaf whose inventory says ``gpufleet_switch_os: sonic`` is read, never changed, by
module_utils/fabric/sonic_leaf.py (the action plugin reads its CONFIG_DB over SSH); ``os`` and its
check are here so that both kinds of leaf are refused the same way.

Runs on the controller (the switches' management network); stdlib and ansible.module_utils only.
"""

from __future__ import annotations

import signal

from ansible_collections.gpufleet.node.plugins.module_utils.core import signals
from ansible_collections.gpufleet.node.plugins.module_utils.core.inputs import refuse_bad_input
from ansible_collections.gpufleet.node.plugins.module_utils.core.role_plan import Plan
from ansible_collections.gpufleet.node.plugins.module_utils.fabric.fabric_judge import leaf_read
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


def input_errors(params):
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


def validate(node, params):
    """Refuses bad ``params`` (:func:`input_errors`) and a SONiC leaf, which the action plugin reads."""
    refuse_bad_input(node, "read or change the switch", input_errors(params))
    if params["os"] == "sonic":
        # the action plugin reads a SONiC leaf itself; the module runs only for Cumulus ones
        node.fail_json(
            msg="%s: a SONiC leaf is read by the gpufleet.node.switch_qos action plugin over its own "
            "connection, not by this module" % (params["name"] or "this leaf"),
            input_error=True,
        )


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
    return leaf_read("switch.nvue[%s]" % reading["name"], reading, "%s: NVUE API read" % reading["name"])


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


def plan(node, params):
    """Read the switch once, compare the profile with its applied configuration; writes nothing.

    A switch that cannot be read has no changes and a failed ``switch.nvue`` check; a port in
    ``ports`` the switch does not have is an input error found against what was read, and fails the
    module before anything is planned."""
    try:
        nvue = client(params, params["name"])
    except NvueError as exc:
        node.fail_json(msg=str(exc), input_error=exc.kind in ("config", "usage"))
    planned = _compare(nvue, params, [nvue.transport_hint] if nvue.transport_hint else [])
    if planned.state["errors"]:
        node.fail_json(
            msg="; ".join(planned.state["errors"]),
            input_error=True,
            checks=planned.checks,
            revision=None,
            hints=planned.hints,
        )
    return planned


def _compare(nvue, params, hints):
    """The Plan of the switch as read now: state ``nvue``, ``reading``, ``patches``, ``errors`` (a port
    the switch does not have), ``revision`` (None: nothing applied)."""
    reading = read(nvue, nvue.name)
    state = dict(nvue=nvue, reading=reading, patches={}, errors=[], revision=None)
    changes = []
    if reading["read"]:
        try:
            interfaces = nvue.read_interfaces("applied")
            state["errors"] = unknown_ports(params, interfaces, nvue.name)
            if not state["errors"]:
                wanted = patches(params, params["ports"] or _front_panel(interfaces))
                changes = nvue.plan(wanted)
                state["patches"] = wanted
        except NvueError as exc:
            reading.update(read=False, error=str(exc), kind=exc.kind)
    return Plan(changes, [reading_check(reading)], hints, reboot_required=None, **state)


def _interrupted(signum):
    """SIGTERM (how gpufleet stops a canceled run's workers) and SIGINT become KeyboardInterrupt naming
    the signal: the client then settles the revision it made (nvue_client.apply) instead of dying
    with it pending."""
    return KeyboardInterrupt(signal.Signals(signum).name)


def apply(node, params, planned):
    """Apply what differs through one revision, then read the switch again: the Plan of the changes
    made, the revision and the switch as read after it. Fails the module on a switch that was not read
    (before or after), a revision NVUE refused, and a value the switch did not keep."""
    done = _applied(node, params, planned) if planned.state["reading"]["read"] else planned
    if not done.state["reading"]["read"]:
        node.fail_json(
            msg=done.state["reading"]["error"], **dict(done.result(), **result(node, params, done))
        )
    return done


def _applied(node, params, planned):
    if not planned.changes:
        return planned
    nvue = planned.state["nvue"]
    returned = dict(changes=planned.changes, checks=planned.checks, hints=planned.hints)
    try:
        with signals.unwinding((signal.SIGINT, signal.SIGTERM), _interrupted):
            outcome = nvue.apply(planned.state["patches"])
            nvue.forget()
            after = _compare(nvue, params, planned.hints)
    except NvueError as exc:
        node.fail_json(msg=str(exc), revision=exc.revision, revision_state=exc.revision_state, **returned)
    done = Plan(
        outcome["changes"],
        after.checks,
        planned.hints,
        reboot_required=None,
        **dict(after.state, revision=outcome["revision"], left=after.changes),
    )
    if after.changes:
        node.fail_json(
            msg="%s did not keep %s after revision %s was applied"
            % (nvue.name, ", ".join(c["setting"] for c in after.changes), outcome["revision"]),
            revision=outcome["revision"],
            **dict(returned, changes=done.changes, checks=done.checks),
        )
    return done


def result(node, params, planned):
    """The module's own return values: the revision applied (None when none) and the reading."""
    return dict(revision=planned.state["revision"], reading=planned.state["reading"])


def diff(node, params, planned):
    """Ansible's diff of the changes (each setting from, then to), headed by the switch's name."""
    if not planned.changes:
        return None
    name = planned.state["nvue"].name
    before = "".join("%s: %s\n" % (c["setting"], c["from"]) for c in planned.changes)
    after = "".join("%s: %s\n" % (c["setting"], c["to"]) for c in planned.changes)
    return dict(before=before, after=after, before_header=name, after_header=name)
