#!/usr/bin/python
# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Judge each RoCE port's cabling (LLDP) and its leaf's side of the link; changes nothing."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: fabric
short_description: Each RoCE port cabled as planned (LLDP) and its leaf lossless for the host's RoCE traffic
version_added: "0.1.0"
description:
  - Reads the node's mlx5 RoCE ports (sysfs) and their LLDP neighbours (C(lldpctl -f json0)) once.
  - C(fabric.neighbor[<ibdev>]), for each port O(cabling) names, the neighbour LLDP hears against the plan
    (a port with no neighbour fails too).
  - Per link C(<node>:<ibdev> -> <leaf>:<port>) (the leaf and port LLDP hears, else the plan's), the leaf's
    side from its reading in O(switches) (the module M(gpufleet.node.switch_qos) reads each leaf once per
    run) against the host's in O(host) - C(fabric.switch_dscp) (the RoCE DSCP lands on the host's PFC
    priority), C(fabric.switch_pfc), C(fabric.switch_ecn), C(fabric.cnp_priority) and C(fabric.switch_mtu),
    each naming both ends.
  - "A leaf in O(switches) that was not read fails its links as C(fabric.switch_read[<leaf>]) (fail closed)."
  - Changes nothing; the checks are the result.
options:
  node:
    description: The node's name in the checks (its inventory name).
    type: str
    required: true
  cabling:
    description:
      - 'The cabling plan, RoCE device to C(leaf:port) (C({mlx5_0: "leaf01:swp1"})). Empty checks no cabling.'
    type: dict
    default: {}
  switches:
    description:
      - The leaves' readings by inventory name, each as M(gpufleet.node.switch_qos) returns C(reading)
        (C(read), C(error), C(qos), C(mtu)); an empty dict is a leaf not read in this run.
      - A leaf LLDP hears that is not here is not judged (a hint says so).
    type: dict
    default: {}
  host:
    description: The host's side of every link, from the rdma_link and rdma_qos roles' settings.
    type: dict
    required: true
    suboptions:
      roce_dscp:
        description: DSCP 0..63 of the host's RoCE traffic (ToS 106 is 26).
        type: int
        required: true
      cnp_dscp:
        description: DSCP 0..63 of the host's CNPs.
        type: int
        required: true
      priority:
        description: The host's PFC priority 0..7 for RoCE.
        type: int
        required: true
      mtu:
        description: The host's RoCE netdev MTU.
        type: int
        required: true
extends_documentation_fragment: [gpufleet.node.attributes.read_only, gpufleet.node.attributes]
notes:
  - Needs lldpd running on the node (C(lldpctl)) when O(cabling) or O(switches) is given.
seealso:
  - module: gpufleet.node.switch_qos
  - module: gpufleet.node.node_facts
author:
  - gpufleet developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Judge the RoCE links of the node against its cabling plan and the leaves read in this run
  gpufleet.node.fabric:
    node: "{{ inventory_hostname }}"
    cabling: {mlx5_0: "leaf01:swp1", mlx5_4: "leaf02:swp1"}
    switches: "{{ {'leaf01': hostvars['leaf01'].switch_qos_reading.reading} }}"
    host: {roce_dscp: 26, cnp_dscp: 48, priority: 3, mtu: 4200}
"""

RETURN = r"""
# changes (always empty) and the type of checks: the no_changes and checks fragments
extends_documentation_fragment: [gpufleet.node.no_changes, gpufleet.node.checks]
checks:
  description: C(fabric.neighbor[<ibdev>]) and, per link, C(fabric.switch_*[<node>:<ibdev> -> <leaf>:<port>]).
  sample: [{"name": "fabric.switch_pfc[node01:mlx5_4 -> leaf02:swp1]", "ok": false, "value": [],
            "limit": [3], "unit": "", "message": "node01:mlx5_4 -> leaf02:swp1: the switch has PFC on
            priorities none, the host on 3"}]
hints:
  description: Leaves LLDP hears that are not in O(switches).
  returned: always
  type: list
  elements: str
"""

from ansible_collections.gpufleet.node.plugins.module_utils.core.role_module import run
from ansible_collections.gpufleet.node.plugins.module_utils.fabric import fabric as role


def main():
    run(role)


if __name__ == "__main__":
    main()
