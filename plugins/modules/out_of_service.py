#!/usr/bin/python
# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: out_of_service
short_description: Fail a node that is already out of service (gpufleet's drain record, or a person's drain)
version_added: "0.1.0"
description:
  - The first judgement of C(gpufleet watch --act) on a node it is about to quarantine
    (C(playbooks/guardian_act.yml)), made again under the node's run lock - the watch's reading may be
    minutes old.
  - The node is already out of service when the drain role's record is on it (O(record_path) - gpufleet
    took it out, a gate that blocked it or an earlier quarantine) or when its scheduler shows it drained
    for a reason that is not gpufleet's (O(scheduler) - a person drained it on purpose; a reason whose
    first word is C(gpufleet) is gpufleet's).
  - Returns one check, C(guardian.already_out), and B(fails) when the node is out, so the playbook changes
    nothing on it.
options:
  record_path:
    description:
      - The drain role's record on the node (C(drain_record_path)).
      - Empty - the record is not read (a node that does not answer; its scheduler alone is judged).
    type: path
    default: /var/lib/gpufleet/drained
  scheduler:
    description:
      - What C(scontrol show node <name>) printed for the node, read where the drain role runs scontrol
        (C(drain_delegate_to)). Empty - no scheduler to ask (drain method other than slurm).
    type: str
    default: ""
  node_name:
    description: The node's name in its scheduler, for the message.
    type: str
    default: ""
extends_documentation_fragment: [gpufleet.node.attributes.read_only, gpufleet.node.attributes]
seealso:
  - module: gpufleet.node.remediation_history
author:
  - gpufleet developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: "Quarantine: check the node is not already out of service"
  gpufleet.node.out_of_service:
    record_path: /var/lib/gpufleet/drained
    scheduler: "{{ scontrol_show_node.stdout | default('') }}"
    node_name: "{{ inventory_hostname }}"
"""

RETURN = r"""
checks:
  description: One check, C(guardian.already_out), failed when the node is already out of service.
  returned: always
  type: list
  elements: dict
  sample: [{"name": "guardian.already_out", "ok": false, "value": "slurm: RMA 4711", "limit": "in service",
            "unit": "", "message": "Slurm shows node07 DRAIN for 'RMA 4711', a reason that is not ..."}]
record:
  description: The drain record's text, or null when there is none.
  returned: always
  type: str
scheduler:
  description: The scheduler's state and reason for the node, or null without a scheduler.
  returned: always
  type: dict
  sample: {"state": "IDLE+DRAIN", "reason": "RMA 4711"}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.node.plugins.module_utils.node import drain_state, out_of_service


def main():
    module = AnsibleModule(
        argument_spec=dict(
            record_path=dict(type="path", default="/var/lib/gpufleet/drained"),
            scheduler=dict(type="str", default=""),
            node_name=dict(type="str", default=""),
        ),
        supports_check_mode=True,
    )
    p = module.params
    record = out_of_service.read_record(p["record_path"])
    slurm = None
    if p["scheduler"].strip():
        try:
            slurm = drain_state.parse_slurm_node(p["scheduler"])
        except ValueError as exc:
            module.fail_json(
                msg="scontrol show node %s: %s" % (p["node_name"], exc), checks=[], record=record
            )
    check = out_of_service.already_out_check(record, p["record_path"], slurm, p["node_name"])
    result = dict(
        changed=False,
        checks=[check],
        record=record,
        scheduler=dict(state=slurm[0], reason=slurm[1]) if slurm else None,
        msg=check["message"],
    )
    if not check["ok"]:
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
