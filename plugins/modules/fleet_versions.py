#!/usr/bin/python
# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: fleet_versions
short_description: Name the node whose driver, CUDA, VBIOS or NIC firmware differs from its peers
version_added: "0.1.0"
description:
  - Compares O(host)'s versions (M(gpufleet.node.node_health)'s C(gpufleet_versions) fact) with those of the
    other nodes of the run that have the same GPU product (a node with a GPU missing stays among its peers).
    Within at least three such peers, the value most of them share is the profile's; a node with another one
    fails C(fleet.versions[<field>]) for C(driver), C(cuda), C(vbios) and C(nic_firmware), naming both values.
  - With fewer than three peers, or no majority for a field, the fleet's known versions (O(known)) decide, so
    a gate limited to the one or two nodes back from maintenance still finds the odd node out. Without them
    nothing is judged, and the check says so.
  - Run it delegated to the controller (C(delegate_to localhost)), once per node, after node_health ran on
    every node of the play.
  - Changes nothing.
options:
  host:
    description: The node judged (C(inventory_hostname)).
    type: str
    required: true
  fleet:
    description: Every node of the run and its C(gpufleet_versions) (null for a node that has none).
    type: dict
    required: true
  known:
    description:
      - The fleet's known versions (the role input C(thermal_gate_fleet_versions)) - per GPU product, as
        nvidia-smi names it, some of C(driver), C(cuda), C(vbios) and C(nic_firmware), each a version
        string (C(vbios) and C(nic_firmware) also a list of the node's distinct versions).
      - Anything else is refused naming the entry, before any node is compared.
    type: dict
    default: {}
extends_documentation_fragment: [gpufleet.node.attributes.read_only, gpufleet.node.attributes]
seealso:
  - module: gpufleet.node.node_health
author:
  - gpufleet developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Name the odd node out of the run
  gpufleet.node.fleet_versions:
    host: "{{ inventory_hostname }}"
    fleet: >-
      {{ dict(ansible_play_hosts | map('extract', hostvars) | selectattr('gpufleet_versions', 'defined')
         | map(attribute='inventory_hostname')
         | zip(ansible_play_hosts | map('extract', hostvars) | selectattr('gpufleet_versions', 'defined')
               | map(attribute='gpufleet_versions'))) }}
  delegate_to: localhost

- name: Judge a node gated alone against the fleet's known versions
  gpufleet.node.fleet_versions:
    host: "{{ inventory_hostname }}"
    fleet: "{{ {inventory_hostname: gpufleet_versions} }}"
    known:
      NVIDIA B300 SXM6 AC:
        driver: "580.95.05"
        cuda: "13.0"
        vbios: ["97.10.4A.00.02"]
        nic_firmware: ["40.44.1036"]
  delegate_to: localhost
"""

RETURN = r"""
# changes (always empty) and the type of checks: the no_changes and checks fragments
extends_documentation_fragment: [gpufleet.node.no_changes, gpufleet.node.checks]
checks:
  description: >-
    C(fleet.versions[<field>]) per field, or one C(fleet.versions) when there were too few peers and no known
    versions for the node's GPU product.
  sample:
    - {"name": "fleet.versions[vbios]", "ok": false, "value": "96.00.74.00.00", "limit": "96.00.74.00.01",
       "unit": "", "message": "node05: GPU VBIOS 96.00.74.00.00 differs from the 96.00.74.00.01 that 9 of the
       10 nodes of NVIDIA B300 run: the odd node out ..."}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.node.plugins.module_utils.core.inputs import refuse_bad_input
from ansible_collections.gpufleet.node.plugins.module_utils.node.fleet_versions import judge, validate_known


def main():
    module = AnsibleModule(
        argument_spec=dict(
            host=dict(type="str", required=True),
            fleet=dict(type="dict", required=True),
            known=dict(type="dict", default={}),
        ),
        supports_check_mode=True,
    )
    p = module.params
    refuse_bad_input(module, "compare the versions", validate_known(p["known"]))
    fleet = {h: (v if isinstance(v, dict) else None) for h, v in p["fleet"].items()}
    checks = judge(p["host"], fleet, p["known"])
    failed = [c for c in checks if not c["ok"]]
    result = dict(changed=False, checks=checks, changes=[])
    if failed:
        module.fail_json(msg="; ".join(c["message"] for c in failed), **result)
    module.exit_json(msg="; ".join(c["message"] for c in checks) or "no versions to compare", **result)


if __name__ == "__main__":
    main()
