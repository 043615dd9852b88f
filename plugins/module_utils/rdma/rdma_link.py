# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rdma_link role's logic, once: its options, read + plan (:func:`plan`) and apply (:func:`apply`).

The module gpufleet.node.rdma_link runs plan then apply; node_facts (drift) runs plan only, on a
module_utils.core.plan_node.PlanNode. So provision --check and drift run the same reads, name the same
changes and checks and fail with the same messages. The plan includes the boot files (the script
that re-applies MTU, RoCE mode and ToS at boot, and its unit), rendered here.

Runs on the managed node (Python 3.11, stdlib only).
"""

from __future__ import annotations

from ansible_collections.gpufleet.node.plugins.module_utils.core import boot_files
from ansible_collections.gpufleet.node.plugins.module_utils.core.plan_node import parallel
from ansible_collections.gpufleet.node.plugins.module_utils.core.role_plan import FailedChecks, boot_plan
from ansible_collections.gpufleet.node.plugins.module_utils.rdma.rdma_judge import (
    ROCE_DOCS,
    link_checks,
    select_ports,
)
from ansible_collections.gpufleet.node.plugins.module_utils.rdma.rdma_parse import ParseError
from ansible_collections.gpufleet.node.plugins.module_utils.rdma.rdma_roles import (
    ROCE_SETTINGS,
    LinkPort,
    plan_link_port,
    port_names,
)

MODULE = "rdma_link"
SCRIPT = "/etc/gpufleet/rdma-link.sh"
UNIT = "gpufleet-rdma-link.service"

ARGUMENT_SPEC = dict(
    ports=dict(type="list", elements="str", default=[]),
    link_type=dict(type="str", choices=["eth", "ib"], default="eth"),
    roce_mode=dict(type="str", choices=["v1", "v2"], default="v2"),
    tos=dict(type="int", default=106),
    mtu=dict(type="int", default=4200),
    min_speed_gbps=dict(type="int", default=0),
    boot_unit=dict(type="bool", default=True),
)

NO_DEVICES = (
    "No mlx5 RDMA devices under /sys/class/infiniband: load mlx5_core and mlx5_ib "
    "(modprobe mlx5_ib), or leave this node out of the RoCE roles"
)

# A link that is not ready is named in the result's msg; the role's task fails on it (its failed_when).
FAILED_CHECKS = FailedChecks(prefix="not ready: ", fail=False)
UNREADABLE = (ParseError, "Could not read the RDMA state from sysfs: %s. Check the mlx5 driver on this node.")

_UNIT_DESCRIPTION = "gpufleet: re-apply the RoCE link settings (MTU, RoCE mode, ToS) of the mlx5 ports"
_UNIT_AFTER = "openibd.service sys-kernel-config.mount network-pre.target"


def validate(node, params):
    """Every rule on the options, before anything is read."""
    if not 0 <= params["tos"] <= 255:
        node.fail_json(
            msg="tos: %d is not a type of service; ToS values are 0..255 (106 = DSCP 26)" % params["tos"]
        )
    if not 68 <= params["mtu"] <= 9978:
        node.fail_json(msg="mtu: %d is outside 68..9978, the MTUs an mlx5 netdev takes" % params["mtu"])
    if params["min_speed_gbps"] < 0:
        node.fail_json(
            msg="min_speed_gbps: %d is negative; use 0 to only check that links are up"
            % params["min_speed_gbps"]
        )


def boot_texts(boot_commands):
    """The boot script and unit: ``[boot_files.boot_file(...)]``."""
    intro = (
        "# Re-applies what the kernel forgets at reboot and gpufleet.node.rdma_link set on the\n"
        "# RoCE ports: MTU, RDMA CM default RoCE mode and default ToS. "
    )
    return boot_files.reapply_files(
        MODULE, SCRIPT, UNIT, intro, boot_commands, _UNIT_DESCRIPTION, ROCE_DOCS, _UNIT_AFTER
    )


def _want(params):
    return {"mtu": params["mtu"], "roce_mode": params["roce_mode"], "roce_tos": params["tos"]}


def _checks(node, port, info, speed_mbps, params, mlxlink):
    down = info["state"] != "ACTIVE"
    return link_checks(
        port.ibdev,
        port.netdev,
        info,
        speed_mbps,
        params["min_speed_gbps"],
        port.diagnosis(mlxlink) if down else None,
    )


def plan(node, params):
    """Read every managed port and its boot files and plan; writes nothing (a missing rdma_cm configfs
    group is created to read the defaults, as cma_roce_mode does).

    Returns a Plan whose ``state`` is ``{ports: [{port, plan, info, speed_mbps}], boot_commands,
    tools}``. Fails through ``node.fail_json``.
    """
    names = port_names()
    if not names:
        node.fail_json(msg=NO_DEVICES)
    chosen, unknown = select_ports({i: p["netdev"] for i, p in names.items()}, params["ports"])
    if unknown:
        node.fail_json(
            msg="ports: %s are not mlx5 RDMA devices or their netdevs on this node; it has: %s"
            % (", ".join(unknown), ", ".join("%s (%s)" % (i, p["netdev"]) for i, p in names.items())),
            input_error=True,
        )
    mlxconfig = node.get_bin_path("mlxconfig") or node.get_bin_path("mstconfig")
    mlxlink = node.get_bin_path("mlxlink")
    want = _want(params)
    ports = [LinkPort(node, i, names[i]["port"], names[i]["netdev"]) for i in chosen]

    def one(port):
        port_plan, port_changes = plan_link_port(node, port, mlxconfig, params["link_type"], want)
        info, speed_mbps = port.link()
        # A run checks the links after its changes (apply); check mode and drift check them as found.
        checks = []
        if port_plan["runs"] and node.check_mode:
            checks = _checks(node, port, info, speed_mbps, params, mlxlink)
        return {
            "port": port,
            "plan": port_plan,
            "changes": port_changes,
            "info": info,
            "speed_mbps": speed_mbps,
            "checks": checks,
        }

    planned = parallel(node, ports, one)
    cma_tool = None
    if any(p["plan"]["roce"] for p in planned):
        cma_tool = node.get_bin_path("cma_roce_mode", required=True)
    changes, checks, hints, boot = [], [], [], []
    for entry in planned:
        changes += entry["changes"]
        checks += entry["checks"]
        if entry["plan"]["link"]["hint"]:
            hints.append(entry["plan"]["link"]["hint"])
        if entry["plan"]["roce"]:
            boot += entry["port"].boot_commands(cma_tool, want)
    files = boot_texts(boot) if params["boot_unit"] else []
    reboot = any(e["plan"]["link"]["reboot_required"] for e in planned)
    tools = {"mlxconfig": mlxconfig, "mlxlink": mlxlink, "cma_roce_mode": cma_tool}
    state = dict(ports=planned, boot_commands=boot, tools=tools)
    return boot_plan(
        node, MODULE, files, changes, checks=checks, hints=hints, reboot_required=reboot, **state
    )


def apply(node, params, planned):
    """Make the planned changes, read each port back (its checks again) and write the boot files.
    Fails through ``node.fail_json`` when a setting did not take."""
    want = _want(params)
    tools = planned.state["tools"]
    checks = []
    for entry in planned.state["ports"]:
        port, port_plan = entry["port"], entry["plan"]
        after = dict(port_plan["before"])
        if port_plan["link"]["set"]:
            port.set_link_type(tools["mlxconfig"], params["link_type"])
            after["link_type"] = params["link_type"]
        if port_plan["roce"]:
            port.apply_roce(tools["cma_roce_mode"], port_plan["before"], want)
            after.update(port.read_roce())
            missed = [s for s in ROCE_SETTINGS if after[s] != want[s]]
            if missed:
                node.fail_json(
                    msg="%s: %s did not take (%s); check dmesg and the mlx5/rdma_cm drivers"
                    % (
                        port.ibdev,
                        ", ".join(missed),
                        ", ".join("%s reads %s, not %s" % (s, after[s], want[s]) for s in missed),
                    ),
                    changes=planned.changes,
                )
        entry["after"] = after
        entry["info"], entry["speed_mbps"] = port.link()
        if port_plan["runs"]:
            checks += _checks(node, port, entry["info"], entry["speed_mbps"], params, tools["mlxlink"])
    planned.checks = checks
    boot_files.write(node, planned.files, planned.found)
    return planned


def _ports(node, params, planned):
    """The module's ``ports`` and the diff's rows before and after: ``(ports, before, after)``."""
    ports, before, after = {}, [], []
    for entry in planned.state["ports"]:
        port, port_plan, info = entry["port"], entry["plan"], entry["info"]
        now = entry.get("after") or dict(port_plan["before"], **wanted(port_plan, params))
        found = dict(port_plan["before"]) if node.check_mode else now
        speed = entry["speed_mbps"] // 1000 if entry["speed_mbps"] else None
        ports[port.ibdev] = dict(
            netdev=port.netdev,
            port=port.port,
            pci_bus_id=port.pci_bus_id,
            link_layer=info["link_layer"],
            link_type_next_boot=found["link_type"],
            mtu=found.get("mtu"),
            roce_mode=found.get("roce_mode"),
            roce_tos=found.get("roce_tos"),
            state=info["state"],
            speed_gbps=speed if info["state"] == "ACTIVE" else None,
        )
        before.append((port.ibdev, port_plan["before"]))
        after.append((port.ibdev, now))
    return ports, before, after


def result(node, params, planned):
    """The module's own return values: each port as the run left it, the boot script's commands."""
    return dict(ports=_ports(node, params, planned)[0], boot_commands=planned.state["boot_commands"])


def _text(rows):
    return "".join(
        "%s.%s: %s\n" % (ibdev, name, value) for ibdev, values in rows for name, value in values.items()
    )


def diff(node, params, planned):
    """The ports' settings before and after, then the boot files'."""
    _found, before, after = _ports(node, params, planned)
    return [dict(before=_text(before), after=_text(after)), *boot_files.diffs(planned.files, planned.found)]


def wanted(port_plan, params):
    """The settings a run leaves on a port (the diff's after side in check mode)."""
    result = {}
    if port_plan["link"]["set"]:
        result["link_type"] = params["link_type"]
    if port_plan["roce"]:
        result.update(_want(params))
    return result
