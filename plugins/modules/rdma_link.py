#!/usr/bin/python
# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

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
  - None of the RoCE settings survives a reboot. With O(boot_unit) (the default) the module writes
    C(/etc/gpufleet/rdma-link.sh), the script of RV(boot_commands), and C(gpufleet-rdma-link.service), a
    oneshot unit that runs it at boot, and enables the unit (C(systemctl daemon-reload) when the unit file
    changed, C(systemctl enable)). Files are written atomically, the script is checked with C(sh -n)
    first, and each starts with C(# managed by gpufleet.node.rdma_link; edits are overwritten).
    They are changes like any other setting, C(rdma_link.boot_file[<path>]) (from and to
    C(sha256:<16 hex>) of the content, from null when missing), C(rdma_link.boot_file_mode[<path>]) and
    C(rdma_link.boot_unit_enabled[<unit>]); C(gpufleet drift) names them the same.
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
extends_documentation_fragment: [gpufleet.node.boot_unit, gpufleet.node.attributes.writes,
  gpufleet.node.attributes]
attributes:
  check_mode:
    details:
      - Reads the same, reports in RV(changes) exactly what a run would change and runs the link checks;
        writes nothing. When a device has no rdma_cm configfs group, the module creates it to read the
        defaults (a view, which changes no setting), as C(cma_roce_mode) does.
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
  - gpufleet developers (!UNKNOWN)
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
extends_documentation_fragment: [gpufleet.node.checks]
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

from ansible_collections.gpufleet.node.plugins.module_utils.core.role_module import run
from ansible_collections.gpufleet.node.plugins.module_utils.rdma import rdma_link as role


def main():
    run(role)


if __name__ == "__main__":
    main()
