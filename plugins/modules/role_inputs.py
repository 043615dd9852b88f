#!/usr/bin/python
# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

# The documentation of the action plugin plugins/action/role_inputs.py, which does the work on the
# controller; this file is never sent to a node.

from __future__ import annotations

DOCUMENTATION = r"""
---
module: role_inputs
short_description: Check the inputs of gpufleet's roles, once per host, on the controller
version_added: "0.4.0"
description:
  - Judges the inputs of each role in O(roles) in one task per host, before anything is read or changed.
    The values the host's variables give are validated against the role's C(preflight) entry point in
    C(meta/argument_specs.yml), then against the role's rules that an argument spec cannot express (ranges,
    unique names and ports, absolute paths, a plain-HTTP BMC without a reason, the fleet's known versions),
    defined once in C(plugins/module_utils/node/role_rules.py).
  - Each refusal names the role, the rule, the setting and what it may be; all of them are in one message.
    The host fails with C(input_error) (the report's configuration error, exit status 2); the other hosts
    carry on.
  - A role whose argument spec refuses a value is not judged by its rules; a rule that reads a setting an
    earlier rule of its role refused is not judged either.
  - The role's defaults and vars must be loaded, as a task in the role has them or a play that imported the
    role (C(ansible.builtin.import_role) of its empty C(options) entry point) does.
  - An action plugin, so nothing is sent to the node, except where the profile names a tool by path
    (C(thermal_gate_nccl_tests_path) with C(thermal_gate_nccl_min_busbw_gbps) set, C(thermal_gate_dcgmi_path)
    with C(thermal_gate_dcgm_diag_level) above 0). Then, once the inputs passed, one shell command (C(test),
    no module, no Python) looks for it on the node, following links, and a path that is not an executable
    regular file there is refused.
options:
  roles:
    description:
      - The roles whose inputs to check, some of C(drain), C(rdma_link), C(rdma_qos), C(fabric),
        C(nccl_topology), C(gpu_pinning), C(gpu_power), C(inference_service), C(thermal_gate).
      - With C(drain) among them, a host whose inputs passed joins the group C(gpufleet_drain_<method>) for
        the rest of the run (as M(ansible.builtin.group_by) would put it there), so a later play can leave
        out the nodes with nothing to drain (C(gpufleet_drain_none)); it is returned as RV(drain_group).
    type: list
    elements: str
    required: true
attributes:
  action:
    description: Indicates this has a corresponding action plugin so some parts of the work can be done on the
      controller.
    support: full
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: It changes nothing in either mode.
  diff_mode:
    description: Will return details on what has changed (or would change in check_mode) in diff mode.
    support: none
author:
  - gpufleet developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Check the inputs of every role the gate runs
  gpufleet.node.role_inputs:
    roles: [drain, rdma_link, rdma_qos, fabric, nccl_topology, gpu_pinning, gpu_power, inference_service,
            thermal_gate]
"""

RETURN = r"""
refused:
  description:
    - With the inputs refused, each refusal, naming the role (C(gpufleet.node.<role>)), the rule and why
      (also joined in C(msg)).
  returned: failed
  type: list
  elements: str
input_error:
  description: True when the inputs were refused (a configuration error, not a fault of the node).
  returned: failed
  type: bool
drain_group:
  description: The group the host joined, C(gpufleet_drain_) and its drain method.
  returned: with C(drain) among O(roles) and the inputs passed
  type: str
  sample: gpufleet_drain_none
"""
