#!/usr/bin/python
# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

# An action plugin (plugins/action/bmc_reset.py) does the work on the controller; this file holds its
# documentation.

from __future__ import annotations

DOCUMENTATION = r"""
---
module: bmc_reset
short_description: Reboot a node through its BMC (Redfish ComputerSystem.Reset) and wait for it to answer
version_added: "0.1.0"
description:
  - What C(gpufleet watch --act) runs on a quarantined node (C(playbooks/guardian_act.yml)) when the failure's
    class is set to V(reboot) in C(guardian_remediation). The node is already drained and its instances
    stopped.
  - Finds the BMC's one C(ComputerSystem) (its C(Systems) collection) and its C(#ComputerSystem.Reset) action,
    then sends C(GracefulRestart). When the node has not gone down within O(graceful_timeout_s) - a hung
    host does not act on a graceful request - it sends C(ForceRestart). An action is sent once, never
    retried, as a second reset is a second reboot.
  - The node went down when its SSH, which answered before, no longer answers with its banner, or the
    C(ComputerSystem) says so (C(PowerState) not C(On), or a C(LastResetTime) later than the one read before
    the reset). A node whose SSH did not answer before the reset is judged by the BMC alone.
  - Then waits for the node to answer again with Ansible's own M(ansible.builtin.wait_for_connection) over
    the node's connection (its transport test, then the ping module), up to O(boot_timeout_s).
  - B(Runs for the node itself, never delegated.) An action plugin runs on the controller, which reaches the
    BMC on the management network, and the wait needs the node's own connection; a delegated task fails.
  - Fails naming the step - the BMC refusing a reset (its Redfish message; HTTP 403 - the account needs the
    C(ConfigureComponents) privilege, the Operator role), the node not going down after C(ForceRestart),
    or the node not answering within O(boot_timeout_s).
  - The BMC and its settings are the ones the coolant read uses (M(gpufleet.node.coolant_facts), roles
    C(thermal_gate)'s C(thermal_gate_bmc_*) from C(gpufleet_bmc_*)). The password and the session token never
    appear in the result.
options:
  graceful_timeout_s:
    description:
      - Seconds to wait for the node to go down after C(GracefulRestart) before sending C(ForceRestart),
        1 to 3600 (the guardian's C(guardian_reboot_graceful_timeout_s), 300 by default).
    type: int
    default: 300
  boot_timeout_s:
    description:
      - Seconds to wait for the node to answer again once it went down, 1 to 7200 (the guardian's
        C(guardian_reboot_boot_timeout_s), 900 by default).
    type: int
    default: 900
  poll_interval_s:
    description: Seconds between two looks at the node's SSH and the BMC while it is expected to go down.
    type: float
    default: 2.0
  ssh_host:
    description: The address of the node's SSH; by default its connection's (C(ansible_host)).
    type: str
  ssh_port:
    description: The port of the node's SSH; by default its connection's (C(ansible_port), else 22).
    type: int
extends_documentation_fragment: [gpufleet.node.attributes, gpufleet.node.bmc, gpufleet.node.account]
attributes:
  check_mode:
    details: Says what it would send; sends nothing, not even a read.
  diff_mode:
    support: none
seealso:
  - module: gpufleet.node.coolant_facts
  - module: gpufleet.node.gpu_reset
  - module: ansible.builtin.wait_for_connection
  - name: DMTF DSP2046 Redfish Resource and Schema Guide
    description: ComputerSystem, its Reset action and ResetType values.
    link: https://www.dmtf.org/dsp/DSP2046
author:
  - gpufleet developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: "Remediation reboot: through the BMC"
  gpufleet.node.bmc_reset:
    baseuri: "{{ thermal_gate_bmc_address }}"
    username: "{{ thermal_gate_bmc_username }}"
    password: "{{ thermal_gate_bmc_password }}"
    ca_path: "{{ thermal_gate_bmc_ca_path if thermal_gate_bmc_ca_path | length > 0 else omit }}"
    graceful_timeout_s: 300
    boot_timeout_s: 900
"""

RETURN = r"""
extends_documentation_fragment: [gpufleet.node.guardian_step]
step:
  sample: reboot
ended:
  sample: "2026-12-06T20:36:41Z"
resets:
  description:
    - Each reset sent - its C(reset_type), when it was C(sent) and when the node was seen C(went_down)
      (empty when not seen).
  returned: always
  type: list
  elements: dict
  sample:
    - {"reset_type": "GracefulRestart", "sent": "2026-12-06T20:31:06Z", "went_down": ""}
    - {"reset_type": "ForceRestart", "sent": "2026-12-06T20:36:06Z", "went_down": "2026-12-06T20:36:08Z"}
down_at:
  description: When the node was seen going down.
  returned: when a reset was sent and the node went down
  type: str
  sample: "2026-12-06T20:36:08Z"
up_at:
  description: When the node answered again.
  returned: success
  type: str
  sample: "2026-12-06T20:36:40Z"
requests:
  description: HTTP requests made to the BMC.
  returned: always
  type: int
  sample: 9
input_error:
  description: True when the options were refused (a configuration error, nothing sent).
  returned: failed
  type: bool
"""
