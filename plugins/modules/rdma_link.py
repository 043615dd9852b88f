#!/usr/bin/python
# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: rdma_link
short_description: Put mlx5 ports in RoCEv2 shape (link type, RoCE mode, ToS, MTU) and verify the links
version_added: "0.1.0"
description:
  - For each NVIDIA (Mellanox) mlx5 port, sets the firmware link type, and on Ethernet ports the RDMA CM
    default RoCE mode, the RDMA CM default ToS and the netdev MTU; then verifies that every link is up
    and at or above a minimum speed.
  - The link type is the firmware setting C(LINK_TYPE_P<n>) (read with C(mlxconfig -d <pci> q), set with
    C(mlxconfig -y -d <pci> set LINK_TYPE_P<n>=ETH)). It takes effect at the next firmware reset or cold
    boot, so the module never reboots; it returns RV(reboot_required) and a hint instead. A port that
    does not run the wanted type yet gets no RoCE settings and no link checks until then.
  - The RoCE mode and ToS are the rdma_cm configfs files C(default_roce_mode) and C(default_roce_tos)
    under C(/sys/kernel/config/rdma_cm/<dev>/ports/<port>); the mode is set with
    C(cma_roce_mode -d <dev> -p <port> -m 1|2), the ToS and the MTU (C(/sys/class/net/<if>/mtu)) by
    writing the files. Each is set only when it differs and read back; a setting that did not take fails
    the module.
  - A port whose link is down or slow cannot be fixed by configuration. It is reported as a failed check
    in RV(checks) (named C(rdma_link.link_state[<dev>]) or C(rdma_link.speed_gbps[<dev>])), never as a
    change, and the module does not fail for it; with C(mlxlink) installed the message carries its
    troubleshooting recommendation.
  - None of the RoCE settings survives a reboot. RV(boot_commands) lists the shell commands that re-apply
    them, for a boot-time unit (the C(gpufleet.node.rdma_link) role installs one).
options:
  ports:
    description:
      - The ports to manage, each named by its RDMA device (C(mlx5_0)) or its netdev (C(ens21np0)).
      - When empty, every mlx5 port of the node. A name that is neither fails the module before any change.
    type: list
    elements: str
    default: []
  link_type:
    description: Firmware link type the ports must run, V(eth) (RoCE) or V(ib) (InfiniBand).
    type: str
    choices: [eth, ib]
    default: eth
  roce_mode:
    description: RDMA CM default RoCE mode of Ethernet ports, V(v2) (routable, UDP) or V(v1).
    type: str
    choices: [v1, v2]
    default: v2
  tos:
    description:
      - RDMA CM default type of service (0..255) of Ethernet ports. The DSCP is the upper six bits;
        V(106) is DSCP 26 with ECN-capable transport.
    type: int
    default: 106
  mtu:
    description:
      - Netdev MTU (68..9978) of Ethernet ports; RoCE uses the largest IB MTU that fits (V(4200) gives 4096).
    type: int
    default: 4200
  min_speed_gbps:
    description: Lowest acceptable link speed in Gb/s; V(0) only checks that each link is up.
    type: int
    default: 0
extends_documentation_fragment:
  - action_common_attributes
attributes:
  check_mode:
    support: full
    details:
      - Reads the same, reports in RV(changes) exactly what a run would change and runs the link checks;
        writes nothing. When a device has no rdma_cm configfs group, the module creates it to read the
        defaults (a view, which changes no setting), as C(cma_roce_mode) does.
  diff_mode:
    support: full
  platform:
    platforms: posix
notes:
  - Needs the mlx5 drivers, the C(rdma_cm) module with configfs on C(/sys/kernel/config), C(cma_roce_mode)
    (MLNX_OFED/DOCA-OFED or mlnx-tools) and C(mlxconfig) (MFT) or C(mstconfig) (mstflint). Tools run
    with C(LC_ALL=C) and need root (C(become)).
  - The RDMA traffic class override of MLNX_OFED (C(tc/<port>/traffic_class)) is not set; NCCL takes its
    traffic class from C(NCCL_IB_TC), and C(gpufleet.node.rdma_facts) reports the override.
  - C(LINK_TYPE_P<n>) is taken as port n = PCI function + 1, the mlx5 layout.
seealso:
  - module: gpufleet.node.rdma_facts
  - module: gpufleet.node.rdma_qos
  - name: RoCE configuration of mlx5 devices (MLNX_OFED)
    description: RDMA CM default RoCE mode and ToS, and the link type firmware setting.
    link: https://docs.nvidia.com/networking/display/mlnxofedv24010331/rdma+over+converged+ethernet+(roce)
author:
  - gpufleet developers
"""

EXAMPLES = r"""
- name: Every mlx5 port in RoCEv2 mode, ToS 106, MTU 4200, links at 400 Gb/s
  gpufleet.node.rdma_link:
    min_speed_gbps: 400
  register: rdma_link

- name: Fail when a link is down or slow
  ansible.builtin.assert:
    that: rdma_link.checks | rejectattr('ok') | list | length == 0
    fail_msg: "{{ rdma_link.checks | rejectattr('ok') | map(attribute='message') | join('; ') }}"

- name: Two ports, by RDMA device and by netdev, RoCE v2 with another ToS
  gpufleet.node.rdma_link:
    ports: [mlx5_0, ens38np0]
    tos: 160
"""

RETURN = r"""
changes:
  description:
    - One entry per setting that differed (in check mode, that would change), in the order applied.
    - Setting names are C(rdma_link.link_type[<dev>]), C(rdma_link.mtu[<netdev>]),
      C(rdma_link.roce_mode[<dev>]) and C(rdma_link.roce_tos[<dev>]).
  returned: always
  type: list
  elements: dict
  sample: [{"setting": "rdma_link.roce_mode[mlx5_0]", "from": "v1", "to": "v2"}]
checks:
  description:
    - Link verifications per port, C(rdma_link.link_state[<dev>]) (value the port state, limit V(ACTIVE))
      and, while the link is up, C(rdma_link.speed_gbps[<dev>]) (value the speed, limit O(min_speed_gbps)).
  returned: always
  type: list
  elements: dict
  sample: [{"name": "rdma_link.link_state[mlx5_7]", "ok": false, "value": "DOWN", "limit": "ACTIVE",
            "unit": "", "message": "mlx5_7 (ens200np0) link is DOWN (physical state Disabled); ..."}]
reboot_required:
  description: Whether a port runs another link type than O(link_type) until its firmware is reset.
  returned: always
  type: bool
  sample: false
hints:
  description: Notes for the operator, such as which port waits for a firmware reset.
  returned: always
  type: list
  elements: str
  sample: ["mlx5_0 runs ib; its firmware link type is eth from the next firmware reset or cold boot"]
ports:
  description: Each managed port, keyed by RDMA device, as read after the run (in check mode, as found).
  returned: always
  type: dict
  sample: {"mlx5_0": {"netdev": "ens21np0", "port": 1, "pci_bus_id": "0000:15:00.0", "link_layer": "Ethernet",
           "link_type_next_boot": "eth", "mtu": 4200, "roce_mode": "v2", "roce_tos": 106, "state": "ACTIVE",
           "speed_gbps": 400}}
boot_commands:
  description:
    - POSIX shell lines that re-apply the MTU, RoCE mode and ToS of every Ethernet port (not only the
      changed ones), for a boot-time unit; words are quoted. Rendered the same in check mode.
  returned: always
  type: list
  elements: str
  sample: ["echo 4200 > /sys/class/net/ens21np0/mtu", "/usr/bin/cma_roce_mode -d mlx5_0 -p 1 -m 2",
           "mkdir -p /sys/kernel/config/rdma_cm/mlx5_0",
           "echo 106 > /sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos"]
"""


from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.node.plugins.module_utils.rdma import (
    ParseError,
)
from ansible_collections.gpufleet.node.plugins.module_utils.rdma_apply import (
    ROCE_SETTINGS,
    LinkPort,
    plan_link_port,
    port_names,
)
from ansible_collections.gpufleet.node.plugins.module_utils.rdma_desired import (
    link_checks,
    select_ports,
)


def _validate(module):
    params = module.params
    if not 0 <= params["tos"] <= 255:
        module.fail_json(
            msg="tos: %d is not a type of service; ToS values are 0..255 (106 = DSCP 26)" % params["tos"]
        )
    if not 68 <= params["mtu"] <= 9978:
        module.fail_json(msg="mtu: %d is outside 68..9978, the MTUs an mlx5 netdev takes" % params["mtu"])
    if params["min_speed_gbps"] < 0:
        module.fail_json(
            msg="min_speed_gbps: %d is negative; use 0 to only check that links are up"
            % params["min_speed_gbps"]
        )


def _text(ports, key):
    lines = []
    for ibdev, values in ports.items():
        for name, value in values[key].items():
            lines.append("%s.%s: %s\n" % (ibdev, name, value))
    return "".join(lines)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            ports=dict(type="list", elements="str", default=[]),
            link_type=dict(type="str", choices=["eth", "ib"], default="eth"),
            roce_mode=dict(type="str", choices=["v1", "v2"], default="v2"),
            tos=dict(type="int", default=106),
            mtu=dict(type="int", default=4200),
            min_speed_gbps=dict(type="int", default=0),
        ),
        supports_check_mode=True,
    )
    _validate(module)
    params = module.params
    want = {"mtu": params["mtu"], "roce_mode": params["roce_mode"], "roce_tos": params["tos"]}
    current_name = None
    try:
        names = port_names()
        if not names:
            module.fail_json(
                msg="No mlx5 RDMA devices under /sys/class/infiniband: load mlx5_core and mlx5_ib "
                "(modprobe mlx5_ib), or leave this node out of the RoCE roles"
            )
        chosen, unknown = select_ports({i: p["netdev"] for i, p in names.items()}, params["ports"])
        if unknown:
            module.fail_json(
                msg="ports: %s are not mlx5 RDMA devices or their netdevs on this node; it has: %s"
                % (", ".join(unknown), ", ".join("%s (%s)" % (i, p["netdev"]) for i, p in names.items()))
            )
        mlxconfig = module.get_bin_path("mlxconfig") or module.get_bin_path("mstconfig")
        mlxlink = module.get_bin_path("mlxlink")
        ports = [LinkPort(module, i, names[i]["port"], names[i]["netdev"]) for i in chosen]

        # read and plan every port before changing any
        changes, hints, plans = [], [], {}
        reboot_required = False
        for port in ports:
            current_name = port.ibdev
            plans[port.ibdev], port_changes = plan_link_port(
                module, port, mlxconfig, params["link_type"], want
            )
            changes += port_changes
            link = plans[port.ibdev]["link"]
            reboot_required = reboot_required or link["reboot_required"]
            if link["hint"]:
                hints.append(link["hint"])

        # apply, read back
        cma_tool = None
        if any(plan["roce"] for plan in plans.values()):
            cma_tool = module.get_bin_path("cma_roce_mode", required=True)
        results, checks, boot = {}, [], []
        for port in ports:
            current_name = port.ibdev
            plan = plans[port.ibdev]
            after = dict(plan["before"])
            if not module.check_mode:
                if plan["link"]["set"]:
                    port.set_link_type(mlxconfig, params["link_type"])
                    after["link_type"] = params["link_type"]
                if plan["roce"]:
                    port.apply_roce(cma_tool, plan["before"], want)
                    after.update(port.read_roce())
                    missed = [s for s in ROCE_SETTINGS if after[s] != want[s]]
                    if missed:
                        module.fail_json(
                            msg="%s: %s did not take (%s); check dmesg and the mlx5/rdma_cm drivers"
                            % (
                                port.ibdev,
                                ", ".join(missed),
                                ", ".join("%s reads %s, not %s" % (s, after[s], want[s]) for s in missed),
                            ),
                            changes=changes,
                        )
            port_info, speed_mbps = port.link()
            if plan["runs"]:
                down = port_info["state"] != "ACTIVE"
                checks += link_checks(
                    port.ibdev,
                    port.netdev,
                    port_info,
                    speed_mbps,
                    params["min_speed_gbps"],
                    port.diagnosis(mlxlink) if down else None,
                )
            if plan["roce"]:
                boot += port.boot_commands(cma_tool, want)
            speed = speed_mbps // 1000 if speed_mbps else None
            results[port.ibdev] = dict(
                netdev=port.netdev,
                port=port.port,
                pci_bus_id=port.pci_bus_id,
                link_layer=port_info["link_layer"],
                link_type_next_boot=after["link_type"],
                mtu=after.get("mtu"),
                roce_mode=after.get("roce_mode"),
                roce_tos=after.get("roce_tos"),
                state=port_info["state"],
                speed_gbps=speed if port_info["state"] == "ACTIVE" else None,
                before=plan["before"],
                after=dict(plan["before"], **_wanted(plan, params, want)) if module.check_mode else after,
            )
    except ParseError as exc:
        module.fail_json(
            msg="Could not read the RDMA state%s from sysfs: %s. Check the mlx5 driver on this node."
            % (" of " + current_name if current_name else "", exc)
        )
    result = dict(
        changed=bool(changes),
        changes=changes,
        checks=checks,
        reboot_required=reboot_required,
        hints=hints,
        ports={i: {k: v for k, v in r.items() if k not in ("before", "after")} for i, r in results.items()},
        boot_commands=boot,
    )
    if module._diff:
        result["diff"] = dict(before=_text(results, "before"), after=_text(results, "after"))
    module.exit_json(**result)


def _wanted(plan, params, want):
    """The settings a run would leave (for the diff in check mode)."""
    wanted = {}
    if plan["link"]["set"]:
        wanted["link_type"] = params["link_type"]
    if plan["roce"]:
        wanted.update(want)
    return wanted


if __name__ == "__main__":
    main()
