#!/usr/bin/python
# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: rdma_facts
short_description: Gather RoCE/RDMA facts of NVIDIA (Mellanox) mlx5 NICs
version_added: "0.1.0"
description:
  - Reports, for every mlx5 RDMA device, what decides whether RoCE traffic is lossless and fast, namely
    the RDMA device to netdev mapping, PCI bus ID and NUMA node, link layer, port state and
    speed, MTU, RDMA CM default RoCE mode and ToS, RDMA traffic class, DSCP/PCP trust, PFC per
    priority, ECN (notification and reaction point) per priority and the CNP DSCP.
  - Link state, speed, MTU, ECN, traffic class and the RoCE defaults come from sysfs and
    configfs (C(/sys/class/infiniband), C(/sys/class/net), C(/sys/kernel/config/rdma_cm)).
    The RDMA device to netdev mapping comes from C(ibdev2netdev) when it is installed, else from
    the same sysfs files it reads. Trust and PFC come from C(mlnx_qos -i <netdev>) (one run per
    Ethernet port). When the rdma_cm configfs group of a device is not there, the RoCE mode comes
    from C(cma_roce_mode -d <dev> -p <port>) and the ToS is V(null).
  - A node without mlx5 devices returns an empty O(ignore:devices) dict and a warning, not a failure.
  - Any tool that fails, or prints something that cannot be read, fails the module with the command
    and its output; a fact that cannot be read is never guessed.
  - Changes nothing on the node.
options:
  interfaces:
    description:
      - Only report these devices, each named by its RDMA device (C(mlx5_0)) or its netdev (C(ens21np0)).
      - The module fails when one of them is not an mlx5 device on the node.
      - When not set, every mlx5 device is reported.
    type: list
    elements: str
  link_diagnostics:
    description:
      - Also run C(mlxlink -d <pci_bus_id>) per device and return its operational state, speed and
        troubleshooting recommendation under RV(ansible_facts.gpufleet_rdma.devices.mlxlink).
      - Needs NVIDIA Firmware Tools (MFT) or mstflint's C(mlxlink); slower (it reads the port registers).
    type: bool
    default: false
  judge:
    description:
      - Also judge each device's link as C(gpufleet facts) reports it and return them in RV(checks),
        C(rdma_link.link_state[<ibdev>]), by the same judge rdma_link and the burn-in use.
      - Never fails the module; a failed check is in RV(checks).
    type: bool
    default: false
extends_documentation_fragment: [gpufleet.node.attributes.facts, gpufleet.node.attributes]
attributes:
  check_mode:
    details:
      - Only reads; runs the same commands in check mode. C(cma_roce_mode), when needed, creates and
        removes the device's rdma_cm configfs group, which is a view and changes no setting.
notes:
  - Needs the mlx5 drivers (C(mlx5_core), C(mlx5_ib)) and C(mlnx_qos) from MLNX_OFED/DOCA-OFED or
    mlnx-tools; tools run with C(LC_ALL=C). C(mlnx_qos) and C(cma_roce_mode) need root (C(become)).
  - O(ignore:roce_mode) is V(v2) for the kernel's C(RoCE v2) and V(v1) for C(IB/RoCE v1).
  - The ECN, CNP DSCP and traffic class files exist with the MLNX_OFED mlx5 driver; on other drivers
    those facts are V(null).
seealso:
  - name: RDMA over Converged Ethernet (RoCE), MLNX_OFED documentation
    description: Trust, PFC, ECN and the RDMA CM defaults these facts report.
    link: https://docs.nvidia.com/networking/display/mlnxofedv24010331/rdma+over+converged+ethernet+(roce)
author:
  - gpufleet developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Gather RDMA facts
  gpufleet.node.rdma_facts:

- name: Fail when a RoCE port is not lossless on priority 3
  ansible.builtin.assert:
    that:
      - item.value.trust == 'dscp'
      - item.value.pfc[3] == 1
      - item.value.ecn.np[3] and item.value.ecn.rp[3]
      - item.value.roce_mode == 'v2'
    fail_msg: "{{ item.key }} ({{ item.value.netdev }}) is not configured for lossless RoCE v2 on priority 3"
  loop: "{{ gpufleet_rdma.devices | dict2items }}"
  loop_control:
    label: "{{ item.key }}"

- name: Facts of two ports, with mlxlink's view of the link
  gpufleet.node.rdma_facts:
    interfaces:
      - mlx5_0
      - ens38np0
    link_diagnostics: true
"""

RETURN = r"""
extends_documentation_fragment: [gpufleet.node.added_facts]
checks:
  description:
    - With O(judge), one C(rdma_link.link_state[<ibdev>]) check per device
      (gpufleet's C({name, ok, value, limit, unit, message})).
  returned: when O(judge) is true
  type: list
  elements: dict
  sample: [{"name": "rdma_link.link_state[mlx5_3]", "ok": false, "value": "DOWN", "limit": "ACTIVE",
            "unit": "", "message": "mlx5_3 (ens3np0) link is DOWN (physical state Disabled)"}]
ansible_facts:
  contains:
    gpufleet_rdma:
      description: RDMA facts of the node.
      returned: success
      type: complex
      contains:
        devices:
          description: One entry per mlx5 RDMA device, keyed by its name; empty when the node has none.
          returned: success
          type: dict
          contains:
            netdev:
              description: The device's network interface (GID 0 netdev), or null.
              type: str
              sample: ens21np0
            port:
              description: The RDMA port these facts are about (mlx5 has one port per PCI function).
              type: int
              sample: 1
            pci_bus_id:
              description: PCI function of the device, as sysfs names it.
              type: str
              sample: "0000:15:00.0"
            numa_node:
              description: NUMA node of the PCI function; null when the platform does not say.
              type: int
              sample: 0
            link_layer:
              description: C(Ethernet) (RoCE) or C(InfiniBand).
              type: str
              sample: Ethernet
            state:
              description: RDMA port state as the kernel names it (C(ACTIVE), C(DOWN), C(INIT), ...).
              type: str
              sample: ACTIVE
            phys_state:
              description: Physical port state (C(LinkUp), C(Disabled), C(Polling), ...).
              type: str
              sample: LinkUp
            speed_gbps:
              description: Link speed in Gb/s while the port is active (netdev speed on Ethernet), else null.
              type: int
              sample: 400
            rate:
              description: The kernel's port rate text (its width and signalling), also shown while down.
              type: str
              sample: 400 Gb/sec (4X NDR)
            mtu:
              description: Netdev MTU in bytes, or null.
              type: int
              sample: 4200
            operstate:
              description: Netdev operational state (C(up), C(down), ...), or null.
              type: str
              sample: up
            roce_mode:
              description: RDMA CM default RoCE mode, V(v2) or V(v1); null on InfiniBand ports.
              type: str
              sample: v2
            roce_tos:
              description: RDMA CM default ToS (configfs C(default_roce_tos)); null when not readable.
              type: int
              sample: 106
            traffic_class:
              description: RDMA traffic class, C(tc/<port>/traffic_class) C(Global tclass=); null if unset.
              type: int
              sample: 106
            trust:
              description: Priority trust state from C(mlnx_qos), C(dscp) or C(pcp); null on InfiniBand ports.
              type: str
              sample: dscp
            pfc:
              description: PFC per priority 0..7 (1 on, 0 off) from C(mlnx_qos); null on InfiniBand ports.
              type: list
              elements: int
              sample: [0, 0, 0, 1, 0, 0, 0, 0]
            ecn:
              description:
                - ECN enables per priority 0..7; C(np) is the notification point (marks CNPs), C(rp) the
                  reaction point (slows down on CNPs). Each is null when the driver has no ECN files.
              type: dict
              sample: {"np": [false, false, false, true, false, false, false, false],
                       "rp": [false, false, false, true, false, false, false, false]}
            cnp_dscp:
              description: DSCP of the CNPs the port sends, or null.
              type: int
              sample: 48
            fw_version:
              description: NIC firmware version.
              type: str
              sample: 40.44.1036
            node_guid:
              description: Node GUID.
              type: str
              sample: a08c:a658:8103:d4e2
            hca_type:
              description: HCA type (C(MT<PCI device id>)).
              type: str
              sample: MT4131
            mlxlink:
              description: With O(link_diagnostics), what C(mlxlink) reports; else null.
              type: dict
              sample: {"state": "Active", "physical_state": "LinkUp", "speed": "400G", "speed_gbps": 400,
                       "width": "4x", "fec": "Standard_RS-FEC - (544,514)", "status_opcode": 0,
                       "recommendation": "No issue was observed"}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.node.plugins.module_utils.core.tool_runner import run_parsed
from ansible_collections.gpufleet.node.plugins.module_utils.rdma.rdma_parse import (
    ParseError,
    parse_cma_roce_mode,
    parse_ibdev2netdev,
    parse_mlnx_qos,
    parse_mlxlink,
)
from ansible_collections.gpufleet.node.plugins.module_utils.rdma.rdma_read import (
    first_port,
    mlx5_devices,
    read_ecn,
    read_ib_device,
    read_ib_port,
    read_netdev,
    read_roce_mode,
    read_roce_tos,
    read_traffic_class,
)
from ansible_collections.gpufleet.node.plugins.module_utils.rdma.roce_counters import link_state_check

_MLXLINK_KEYS = (
    "state",
    "physical_state",
    "speed",
    "speed_gbps",
    "width",
    "fec",
    "status_opcode",
    "recommendation",
)


def _netdevs(module, ibdevs):
    """ibdev -> netdev: ibdev2netdev when installed, else (and for what it leaves out) the sysfs
    file it reads, the netdev of GID 0."""
    mapping = {}
    tool = module.get_bin_path("ibdev2netdev")
    if tool is not None:
        entries = run_parsed(
            module,
            [tool],
            parse_ibdev2netdev,
            "Check that the mlx5 drivers are loaded (lsmod | grep mlx5_ib).",
        )
        mapping = {entry["ibdev"]: entry["netdev"] for entry in entries}
    for ibdev in ibdevs:
        if not mapping.get(ibdev):
            mapping[ibdev] = read_ib_port(ibdev, first_port(ibdev))["netdev"]
    return {ibdev: mapping[ibdev] for ibdev in ibdevs}


def _select(module, names):
    """The devices O(interfaces) asks for (by RDMA device or netdev name), in device order."""
    wanted = module.params["interfaces"]
    if not wanted:
        return list(names)
    chosen = [ibdev for ibdev, netdev in names.items() if ibdev in wanted or netdev in wanted]
    known = set(names) | {netdev for netdev in names.values() if netdev}
    missing = [name for name in wanted if name not in known]
    if missing:
        module.fail_json(
            msg="interfaces %s are not mlx5 RDMA devices or their netdevs on this node; it has: %s"
            % (", ".join(missing), ", ".join("%s (%s)" % (i, n) for i, n in names.items()))
        )
    return chosen


def _qos(module, netdev):
    tool = module.get_bin_path("mlnx_qos", required=True)
    qos = run_parsed(
        module,
        [tool, "-i", netdev],
        parse_mlnx_qos,
        "Check that %s is an mlx5 netdev and that mlnx_qos runs as root." % netdev,
    )
    return qos["trust"], qos["pfc"]


def _roce_mode(module, ibdev, port):
    mode = read_roce_mode(ibdev, port)
    if mode is not None:
        return mode
    # No rdma_cm configfs group for this device: cma_roce_mode creates one to read it.
    tool = module.get_bin_path("cma_roce_mode", required=True)
    return run_parsed(
        module,
        [tool, "-d", ibdev, "-p", str(port)],
        parse_cma_roce_mode,
        "Check that the rdma_cm module is loaded and configfs is mounted on /sys/kernel/config.",
    )


def _mlxlink(module, ibdev, pci_bus_id):
    tool = module.get_bin_path("mlxlink", required=True)
    link = run_parsed(
        module,
        [tool, "-d", pci_bus_id or ibdev],
        parse_mlxlink,
        "Install NVIDIA Firmware Tools (MFT) or mstflint, or set link_diagnostics to false.",
    )
    return {key: link[key] for key in _MLXLINK_KEYS}


def _device(module, ibdev, netdev):
    port = first_port(ibdev)
    info = read_ib_device(ibdev)
    port_info = read_ib_port(ibdev, port)
    netdev = netdev or port_info["netdev"]
    net = read_netdev(netdev) if netdev else dict.fromkeys(("mtu", "operstate", "speed_mbps"))
    ethernet = port_info["link_layer"] == "Ethernet"
    active = port_info["state"] == "ACTIVE"
    speed = None
    if active:
        speed = net["speed_mbps"] // 1000 if ethernet and net["speed_mbps"] else port_info["rate_gbps"]
    trust, pfc = _qos(module, netdev) if ethernet and netdev else (None, None)
    ecn = read_ecn(netdev) if netdev else {"np": None, "rp": None, "cnp_dscp": None}
    return {
        "netdev": netdev,
        "port": port,
        "pci_bus_id": info["pci_bus_id"],
        "numa_node": info["numa_node"],
        "link_layer": port_info["link_layer"],
        "state": port_info["state"],
        "phys_state": port_info["phys_state"],
        "speed_gbps": speed,
        "rate": port_info["rate"],
        "mtu": net["mtu"],
        "operstate": net["operstate"],
        "roce_mode": _roce_mode(module, ibdev, port) if ethernet else None,
        "roce_tos": read_roce_tos(ibdev, port),
        "traffic_class": read_traffic_class(ibdev, port),
        "trust": trust,
        "pfc": pfc,
        "ecn": {"np": ecn["np"], "rp": ecn["rp"]},
        "cnp_dscp": ecn["cnp_dscp"],
        "fw_version": info["fw_version"],
        "node_guid": info["node_guid"],
        "hca_type": info["hca_type"],
        "mlxlink": _mlxlink(module, ibdev, info["pci_bus_id"]) if module.params["link_diagnostics"] else None,
    }


def judged(devices):
    """The checks gpufleet facts reports for the devices read: each link's state, by its one judge."""
    checks = []
    for ibdev, dev in sorted(devices.items()):
        label = "%s (%s)" % (ibdev, dev.get("netdev")) if dev.get("netdev") else ibdev
        checks.append(
            link_state_check(
                ibdev,
                dev,
                "%s link is up" % label,
                "%s link is %s (physical state %s)"
                % (label, dev.get("state") or "unknown", dev.get("phys_state") or "unknown"),
            )
        )
    return checks


def main():
    module = AnsibleModule(
        argument_spec=dict(
            interfaces=dict(type="list", elements="str"),
            link_diagnostics=dict(type="bool", default=False),
            judge=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    devices = {}
    current = None
    try:
        ibdevs = mlx5_devices()
        if not ibdevs:
            module.warn(
                "No mlx5 RDMA devices under /sys/class/infiniband; if this node has NVIDIA/Mellanox NICs, "
                "load mlx5_core and mlx5_ib (modprobe mlx5_ib)."
            )
        else:
            names = _netdevs(module, ibdevs)
            for current in _select(module, names):
                devices[current] = _device(module, current, names[current])
    except ParseError as exc:
        module.fail_json(
            msg="Could not read the RDMA state%s from sysfs: %s. Check the mlx5 driver on this node."
            % (" of " + current if current else "", exc)
        )
    extra = dict(checks=judged(devices)) if module.params["judge"] else {}
    module.exit_json(changed=False, ansible_facts=dict(gpufleet_rdma=dict(devices=devices)), **extra)


if __name__ == "__main__":
    main()
