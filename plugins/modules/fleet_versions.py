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
    other nodes of the run that have the same GPU product and count. Within at least three such peers, the
    value most of them share is the profile's; a node with another one fails C(fleet.versions[<field>])
    for C(driver), C(cuda), C(vbios) and C(nic_firmware), naming both values.
  - Fewer than three peers, or no majority, judges nothing and says so.
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
extends_documentation_fragment:
  - gpufleet.node.attributes.read_only
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
"""

RETURN = r"""
# changes (always empty) and the type of checks: the no_changes and checks fragments
extends_documentation_fragment: [gpufleet.node.no_changes, gpufleet.node.checks]
checks:
  description: C(fleet.versions[<field>]) per field, or one C(fleet.versions) when there were too few peers.
  sample:
    - {"name": "fleet.versions[vbios]", "ok": false, "value": "96.00.74.00.00", "limit": "96.00.74.00.01",
       "unit": "", "message": "node05: GPU VBIOS 96.00.74.00.00 differs from the 96.00.74.00.01 that 9 of the
       10 nodes of 16 x NVIDIA B300 run: the odd node out ..."}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.node.plugins.module_utils.node.fleet_versions import judge


def main():
    module = AnsibleModule(
        argument_spec=dict(host=dict(type="str", required=True), fleet=dict(type="dict", required=True)),
        supports_check_mode=True,
    )
    p = module.params
    fleet = {h: (v if isinstance(v, dict) else None) for h, v in p["fleet"].items()}
    checks = judge(p["host"], fleet)
    failed = [c for c in checks if not c["ok"]]
    result = dict(changed=False, checks=checks, changes=[])
    if failed:
        module.fail_json(msg="; ".join(c["message"] for c in failed), **result)
    module.exit_json(msg="; ".join(c["message"] for c in checks) or "no versions to compare", **result)


if __name__ == "__main__":
    main()
