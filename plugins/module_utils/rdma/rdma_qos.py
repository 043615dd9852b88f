# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rdma_qos role's logic, once: its options, the ports it manages, read + plan and apply.

The module gpufleet.node.rdma_qos runs :func:`plan` then :func:`apply` over every RoCE interface of
the node (or the ones named); node_facts (drift) runs :func:`plan` only, on a
module_utils.core.plan_node.PlanNode. The ports are chosen here, once; the boot script that re-applies
the QoS at boot, and its unit, are rendered here.

Runs on the managed node (Python 3.11, stdlib only).
"""

from __future__ import annotations

from ansible_collections.gpufleet.node.plugins.module_utils.core import boot_files
from ansible_collections.gpufleet.node.plugins.module_utils.core.plan_node import parallel
from ansible_collections.gpufleet.node.plugins.module_utils.core.role_plan import boot_plan
from ansible_collections.gpufleet.node.plugins.module_utils.rdma.rdma_judge import (
    DSCP_RANGE,
    PRIORITIES,
    QOS_SETTINGS,
    ROCE_DOCS,
    bad_values,
    nvue_snippet,
    qos_changes,
)
from ansible_collections.gpufleet.node.plugins.module_utils.rdma.rdma_parse import ParseError
from ansible_collections.gpufleet.node.plugins.module_utils.rdma.rdma_read import read_ib_port
from ansible_collections.gpufleet.node.plugins.module_utils.rdma.rdma_roles import (
    QosInterface,
    port_names,
    qos_desired,
)

MODULE = "rdma_qos"
SCRIPT = "/etc/gpufleet/rdma-qos.sh"
UNIT = "gpufleet-rdma-qos.service"

# What `manage` names -> the options it covers.
MANAGE = {
    "trust": "trust",
    "pfc": "pfc_priorities",
    "ecn": "ecn_priorities",
    "cnp_dscp": "cnp_dscp",
    "global_pause": "global_pause",
}

ARGUMENT_SPEC = dict(
    interfaces=dict(type="list", elements="str", default=[], aliases=["interface"]),
    trust=dict(type="str", choices=["dscp", "pcp"]),
    pfc_priorities=dict(type="list", elements="int"),
    ecn_priorities=dict(type="list", elements="int"),
    cnp_dscp=dict(type="int"),
    global_pause=dict(type="bool"),
    manage=dict(type="list", elements="str", choices=list(MANAGE)),
    switch_snippet=dict(type="bool", default=False),
    boot_unit=dict(type="bool", default=True),
)

UNREADABLE = (ParseError, "Could not read the RDMA devices from sysfs: %s. Check the mlx5 driver.")

_UNIT_DESCRIPTION = (
    "gpufleet: re-apply lossless RoCE QoS (trust, PFC, ECN, CNP DSCP, global pause) of the mlx5 ports"
)
_UNIT_AFTER = "openibd.service network-pre.target gpufleet-rdma-link.service"


def effective(params):
    """The options with every setting ``manage`` leaves out set to None (not read, not changed)."""
    manage = params.get("manage")
    if manage is None:
        return dict(params)
    return dict(params, **{option: None for name, option in MANAGE.items() if name not in manage})


def validate(node, params):
    """Every rule on the (effective) options, before anything is read or changed."""
    params = effective(params)
    for option in ("pfc_priorities", "ecn_priorities"):
        bad = bad_values(params[option], PRIORITIES)
        if bad:
            node.fail_json(
                msg="%s: %s is not a priority; priorities are 0..7 (e.g. [3] for RoCE on priority 3)"
                % (option, ", ".join(str(b) for b in bad))
            )
    if params["cnp_dscp"] is not None and params["cnp_dscp"] not in DSCP_RANGE:
        node.fail_json(msg="cnp_dscp: %s is not a DSCP; DSCP values are 0..63" % params["cnp_dscp"])
    if params["global_pause"] and params["pfc_priorities"]:
        node.fail_json(
            msg="global_pause: true with pfc_priorities %s: mlx5 runs either global pause or PFC, not both; "
            "set global_pause to false" % params["pfc_priorities"]
        )


def boot_texts(interfaces):
    """The boot script and unit from ``[{interface, ibdev, boot_commands}]``."""
    commands = []
    for entry in interfaces:
        commands.append("# %s (%s)" % (entry["interface"], entry["ibdev"]))
        commands += entry["boot_commands"]
    intro = (
        "# Re-applies what the kernel and the NIC forget at reboot and gpufleet.node.rdma_qos set on the\n"
        "# RoCE interfaces: global pause, trust, PFC, ECN and CNP DSCP. "
    )
    return boot_files.reapply_files(
        MODULE, SCRIPT, UNIT, intro, commands, _UNIT_DESCRIPTION, ROCE_DOCS, _UNIT_AFTER
    )


def choose(node, wanted):
    """The interfaces to manage, ``[(netdev, ibdev)]``: ``wanted``, or every mlx5 Ethernet port."""
    names = port_names()
    ethernet = {
        p["netdev"]: i
        for i, p in names.items()
        if p["netdev"] and read_ib_port(i, p["port"])["link_layer"] == "Ethernet"
    }
    interfaces = list(wanted or ethernet)
    unknown = [i for i in interfaces if i not in ethernet]
    if not interfaces or unknown:
        node.fail_json(
            msg="interfaces: %s is not an mlx5 RoCE interface on this node; it has: %s"
            % (
                ", ".join(unknown) or "none",
                ", ".join("%s (%s)" % item for item in ethernet.items()) or "none",
            )
            if interfaces
            else "this node has no mlx5 Ethernet ports (load mlx5_core and mlx5_ib, or check the link type)",
            # an interface this node does not have is the inventory's to fix (configuration)
            input_error=bool(unknown),
        )
    return [(netdev, ethernet[netdev]) for netdev in interfaces]


def plan(node, params):
    """Read every managed interface and the boot files and plan; writes nothing.

    Returns a Plan whose ``state`` is ``{interfaces: [{interface, ibdev, port, before, changes,
    boot_commands}], desired}``.
    """
    params = effective(params)
    desired = qos_desired(params)
    chosen = choose(node, params["interfaces"])

    def one(names):
        netdev, ibdev = names
        port = QosInterface(node, netdev, desired)
        before = port.read()
        return {
            "interface": netdev,
            "ibdev": ibdev,
            "port": port,
            "before": before,
            "changes": qos_changes(netdev, before, desired),
            "boot_commands": port.boot_commands(),
        }

    interfaces = parallel(node, chosen, one)
    changes = [c for entry in interfaces for c in entry["changes"]]
    hints = [
        "%s: DCBX mode is %s, so the switch (LLDP) can override trust and PFC"
        % (e["interface"], e["port"].dcbx)
        for e in interfaces
        if e["port"].dcbx is not None and e["port"].dcbx != "OS controlled"
    ]
    files = boot_texts(interfaces) if params["boot_unit"] else []
    return boot_plan(node, MODULE, files, changes, hints=hints, interfaces=interfaces, desired=desired)


def apply(node, params, planned):
    """Set what differs on each interface, read it back (fail when a setting did not take), then write
    the boot files."""
    for entry in planned.state["interfaces"]:
        entry["after"] = entry["before"]
        if not entry["changes"]:
            continue
        port, netdev = entry["port"], entry["interface"]
        port.apply(entry["before"])
        entry["after"] = port.read()
        missed = qos_changes(netdev, entry["after"], planned.state["desired"])
        if missed:
            node.fail_json(
                msg="%s did not take: %s; check `mlnx_qos -i %s`, the DCBX mode (with firmware DCBX the "
                "switch overrides) and the driver messages (dmesg)"
                % (
                    netdev,
                    ", ".join(
                        "%s reads %s after setting %s" % (m["setting"], m["from"], m["to"]) for m in missed
                    ),
                    netdev,
                ),
                changes=planned.changes,
                missed=missed,
            )
    boot_files.write(node, planned.files, planned.found)
    return planned


def _managed(planned):
    return {name: value for name, value in planned.state["desired"].items() if value is not None}


def result(node, params, planned):
    """The module's own return values: each interface as the run left it, the boot script's commands, the
    switch's side (``switch_config``, and a hint with it when ``switch_snippet``)."""
    managed = _managed(planned)
    snippet = nvue_snippet(managed)
    hints = list(planned.hints)
    if params["switch_snippet"]:
        hints.append("; ".join(snippet))
    interfaces = {
        entry["interface"]: dict(
            ibdev=entry["ibdev"], state={name: entry.get("after", entry["before"])[name] for name in managed}
        )
        for entry in planned.state["interfaces"]
    }
    return dict(
        hints=hints,
        interfaces=interfaces,
        boot_commands=[line for entry in planned.state["interfaces"] for line in entry["boot_commands"]],
        switch_config=snippet,
    )


def _text(state):
    return "".join("%s: %s\n" % (name, state[name]) for name in QOS_SETTINGS if state.get(name) is not None)


def diff(node, params, planned):
    """Per interface its managed settings before and as wanted, then the boot files'."""
    managed = _managed(planned)
    diffs = []
    for entry in planned.state["interfaces"]:
        header = "%s (%s)" % (entry["interface"], entry["ibdev"])
        diffs.append(
            dict(
                before=_text({name: entry["before"][name] for name in managed}),
                after=_text(managed),
                before_header=header,
                after_header=header,
            )
        )
    return diffs + boot_files.diffs(planned.files, planned.found)


def verify(node, params, planned, result):
    """A fresh read of every interface after a run that changed something (one that changed nothing
    has just read them as wanted): a setting that went back right after being set (firmware DCBX,
    another agent) fails the module, naming it."""
    if not planned.changes:
        return
    again = plan(node, params)
    if again.changes:
        node.fail_json(
            msg="not lossless: %s went back right after being set (is the switch overriding through "
            "firmware DCBX?)" % ", ".join(c["setting"] for c in again.changes),
            went_back=again.changes,
            **result,
        )
