#!/usr/bin/python
# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: rdma_qos
short_description: Make the mlx5 RoCE interfaces lossless (DSCP trust, PFC, ECN, CNP DSCP, no global pause)
version_added: "0.1.0"
description:
  - Sets the QoS of NVIDIA (Mellanox) mlx5 Ethernet interfaces for RoCE (O(interfaces), or every one
    of the node), namely the priority trust
    state, PFC per priority, ECN notification point (NP) and reaction point (RP) per priority, the DSCP
    of the congestion notification packets (CNPs) it sends, and IEEE 802.3x global pause.
  - Reads trust and PFC from C(mlnx_qos -i <interface>) (the current and the older layouts), ECN and CNP
    DSCP from C(/sys/class/net/<interface>/ecn), global pause from C(ethtool -a <interface>).
  - Sets trust and PFC with one C(mlnx_qos -i <interface> [--trust T] [--pfc F]) run, ECN and CNP DSCP by
    writing those sysfs files, global pause with C(ethtool -A <interface> rx off tx off). Only what
    differs is set, and every setting is read back; the module fails when one did not take.
  - After a run that changed something (not in check mode) every interface is read again once the boot
    files are written; a setting that went back (firmware DCBX, another agent) fails the module, naming
    it in RV(went_back).
  - Each setting is managed only when its option is given (and, with O(manage), named there); an option
    left out is neither read nor changed. With only O(trust) and O(pfc_priorities) the module runs
    C(mlnx_qos) and touches nothing else.
  - None of these settings survives a reboot. With O(boot_unit) (the default) the module writes
    C(/etc/gpufleet/rdma-qos.sh), the script of RV(boot_commands) for every managed interface, and
    C(gpufleet-rdma-qos.service), a oneshot unit that runs it at boot, and enables the unit
    (C(systemctl daemon-reload) when the unit file changed, C(systemctl enable)). Files are written
    atomically, the script is checked with C(sh -n) first, and each starts with
    C(# managed by gpufleet.node.rdma_qos; edits are overwritten). They are changes named
    C(rdma_qos.boot_file[<path>]), C(rdma_qos.boot_file_mode[<path>]) and
    C(rdma_qos.boot_unit_enabled[<unit>]), as C(gpufleet drift) names them.
  - Refuses, before it changes anything, an interface that is not the netdev of an mlx5 RDMA device, a
    priority outside 0..7, a CNP DSCP outside 0..63 and global pause together with PFC.
options:
  interfaces:
    description:
      - The netdevs of mlx5 RDMA devices (as C(ibdev2netdev) shows them), e.g. C(ens21np0).
      - Empty means every Ethernet port of an mlx5 RDMA device on the node. A name the node does not
        have fails the module before any change.
    type: list
    elements: str
    default: []
    aliases: [interface]
  trust:
    description:
      - Priority trust state. V(dscp) classifies by the IP DSCP (what RoCEv2 fabrics use), V(pcp) by the
        VLAN priority.
      - Not managed when not set.
    type: str
    choices: [dscp, pcp]
  pfc_priorities:
    description:
      - The priorities (0..7) that get PFC; every other priority has PFC off. V([]) turns PFC off.
      - Not managed when not set.
    type: list
    elements: int
  ecn_priorities:
    description:
      - The priorities (0..7) with ECN on, at the notification point (C(roce_np), marks CNPs) and the
        reaction point (C(roce_rp), slows down on CNPs) alike; every other priority has ECN off.
      - Not managed when not set.
    type: list
    elements: int
  cnp_dscp:
    description:
      - DSCP (0..63) of the CNPs the interface sends (C(ecn/roce_np/cnp_dscp)).
      - Not managed when not set.
    type: int
  global_pause:
    description:
      - IEEE 802.3x link-level pause, receive and transmit. V(false) for PFC, which mlx5 does not run
        together with global pause.
      - Not managed when not set.
    type: bool
  switch_snippet:
    description:
      - Also put the matching switch-side configuration (Cumulus Linux NVUE C(nv set qos ...)) in
        RV(hints), for the operator to compare host and switch. Read-only; RV(switch_config) always
        carries it.
    type: bool
    default: false
  manage:
    description:
      - The settings managed, of V(trust), V(pfc) (O(pfc_priorities)), V(ecn) (O(ecn_priorities)),
        V(cnp_dscp) and V(global_pause); an option whose setting is not named is ignored.
      - When not set, every setting whose option is given.
    type: list
    elements: str
    choices: [trust, pfc, ecn, cnp_dscp, global_pause]
extends_documentation_fragment: [gpufleet.node.boot_unit, gpufleet.node.attributes.writes,
  gpufleet.node.attributes]
notes:
  - Needs C(mlnx_qos) (MLNX_OFED/DOCA-OFED or mlnx-tools) for O(trust) and O(pfc_priorities), the mlx5
    driver's C(ecn/) sysfs files for O(ecn_priorities) and O(cnp_dscp), and C(ethtool) for O(global_pause).
    Tools run with C(LC_ALL=C) and need root (C(become)).
  - When DCBX is controlled by the firmware (LLDP from the switch), the switch can override trust and
    PFC; RV(hints) says so.
seealso:
  - module: gpufleet.node.rdma_facts
  - name: RDMA over Converged Ethernet (RoCE), MLNX_OFED documentation
    description: Trust, PFC, ECN and CNP settings of mlx5 NICs.
    link: https://docs.nvidia.com/networking/display/mlnxofedv24010331/rdma+over+converged+ethernet+(roce)
author:
  - gpufleet developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Lossless RoCE on priority 3 (DSCP 26), CNPs on DSCP 48, on every RoCE interface
  gpufleet.node.rdma_qos:
    trust: dscp
    pfc_priorities: [3]
    ecn_priorities: [3]
    cnp_dscp: 48
    global_pause: false

- name: Only trust and PFC on one interface; ECN and pause stay as they are
  gpufleet.node.rdma_qos:
    interfaces: [ens21np0]
    trust: dscp
    pfc_priorities: [3]

- name: Every setting given, only ECN and CNP DSCP managed (the switch sets trust and PFC), as drift
  gpufleet.node.rdma_qos:
    trust: dscp
    pfc_priorities: [3]
    ecn_priorities: [3]
    cnp_dscp: 48
    manage: [ecn, cnp_dscp]
  check_mode: true
"""

RETURN = r"""
extends_documentation_fragment: [gpufleet.node.checks]
changes:
  description:
    - One entry per setting that differed (in check mode, that would change), in the order applied.
    - Setting names are C(rdma_qos.<setting>[<interface>]) with setting one of C(global_pause), C(trust),
      C(pfc), C(ecn_np), C(ecn_rp), C(cnp_dscp); priorities are lists of the priorities that are on. Then
      the boot files' C(rdma_qos.boot_file[<path>]), C(rdma_qos.boot_file_mode[<path>]) and
      C(rdma_qos.boot_unit_enabled[<unit>]).
  returned: always
  type: list
  elements: dict
  sample: [{"setting": "rdma_qos.pfc[ens21np0]", "from": [], "to": [3]},
           {"setting": "rdma_qos.ecn_np[ens21np0]", "from": [], "to": [3]}]
checks:
  description: Verifications of this module (none; the settings are read back and a miss fails the module).
  sample: []
reboot_required:
  description: Whether a change needs a reboot to take effect (never, these settings apply at once).
  returned: always
  type: bool
  sample: false
hints:
  description: Notes for the operator (firmware-controlled DCBX; the switch snippet with O(switch_snippet)).
  returned: always
  type: list
  elements: str
  sample: ["ens21np0: DCBX mode is FW controlled, so the switch (LLDP) can override trust and PFC"]
interfaces:
  description:
    - Each managed interface, its RDMA device and its managed settings after the run (in check mode, as
      found).
  returned: always
  type: dict
  sample: {"ens21np0": {"ibdev": "mlx5_0", "state": {"trust": "dscp", "pfc": [3], "ecn_np": [3],
           "ecn_rp": [3], "cnp_dscp": 48, "global_pause": false}}}
boot_commands:
  description:
    - POSIX shell lines that re-apply every managed setting of every interface (not only the changed
      ones), what the boot script runs; words are quoted. Rendered the same in check mode.
  returned: always
  type: list
  elements: str
  sample: ["/usr/bin/mlnx_qos -i ens21np0 --trust dscp --pfc 0,0,0,1,0,0,0,0",
           "echo 1 > /sys/class/net/ens21np0/ecn/roce_np/enable/3"]
switch_config:
  description: Read-only Cumulus Linux NVUE lines matching the managed settings, for comparison.
  returned: always
  type: list
  elements: str
  sample: ["nv set qos roce mode lossless", "nv set qos pfc default-global switch-priority 3",
           "nv config apply"]
went_back:
  description: The settings the fresh read after the run found changed again ({setting, from, to}).
  returned: failure
  type: list
  elements: dict
  sample: [{"setting": "rdma_qos.pfc[ens21np0]", "from": [], "to": [3]}]
"""

from ansible_collections.gpufleet.node.plugins.module_utils.core.role_module import run
from ansible_collections.gpufleet.node.plugins.module_utils.rdma import rdma_qos as role


def main():
    run(role)


if __name__ == "__main__":
    main()
