#!/usr/bin/python
# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_reset
short_description: Reset every GPU of a drained node with nvidia-smi -r, under the tool's own rules
version_added: "0.1.0"
description:
  - What C(gpufleet watch --act) runs on a quarantined node (C(playbooks/guardian_act.yml)) when the failure's
    class is set to V(gpu_reset) in C(guardian_remediation). The node is already drained and its instances
    stopped.
  - Reads every GPU (C(nvidia-smi --query-gpu), persistence mode) and the compute processes
    (C(nvidia-smi --query-compute-apps)). nvidia-smi(1) allows no application on a GPU being reset, so a GPU
    any process uses B(refuses the whole reset before anything changes); the module fails naming each GPU
    and its processes.
  - Turns persistence mode off (C(nvidia-smi -pm 0 -i <the GPUs that have it>)) first, because the
    persistence daemon's hold on a GPU makes the driver refuse the reset (exit 255, "In use by another
    client"). Persistence mode is B(left off); the gate's M(gpufleet.node.gpu_power) role turns it on again
    when it re-asserts the node's settings, before the GPUs are judged.
  - Resets B(every GPU the driver lists) (C(nvidia-smi -r) without C(-i), which resets all GPUs). On NVSwitch
    systems the GPUs of one NVLink domain are reset together, and a node is one such domain.
  - Reads the GPUs again and returns each GPU's result - whether the tool said it reset it and whether the
    driver still lists it. A GPU that fell off the bus is not listed, and a reset does not bring it back
    (a reboot may).
  - Fails when a tool refuses (a non-zero exit), its message naming each GPU the tool named and the tool's
    words; when nothing was reset the result says so.
notes:
  - Sources of the rules - nvidia-smi(1), C(-r, --gpu-reset); NVIDIA/NVSentinel issue 1690 and pull request
    1692 (persistence mode refuses a reset; turning it off is enough).
extends_documentation_fragment:
  - gpufleet.node.attributes
  - gpufleet.node.nvidia_smi
attributes:
  check_mode:
    details: Reads the GPUs and their processes and says what it would do; turns nothing off, resets nothing.
  diff_mode:
    support: none
seealso:
  - module: gpufleet.node.gpu_power
  - module: gpufleet.node.bmc_reset
author:
  - gpufleet developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: "Remediation gpu_reset: reset every GPU"
  gpufleet.node.gpu_reset:
  register: reset
"""

RETURN = r"""
extends_documentation_fragment: [gpufleet.node.guardian_step]
step:
  sample: gpu_reset
ended:
  sample: "2026-12-06T20:31:09Z"
nvidia_smi:
  description: The nvidia-smi that ran.
  returned: always
  type: str
  sample: /usr/bin/nvidia-smi
persistence_off:
  description: The bus ids of the GPUs persistence mode was turned off on (check mode - would be).
  returned: always
  type: list
  elements: str
  sample: ["00000000:1B:00.0"]
in_use:
  description: When a process uses a GPU, per bus id the processes (pid, name, memory); nothing was reset.
  returned: when refused for processes
  type: dict
  sample: {"00000000:1B:00.0": ["pid 4242 (python3, 72000 MiB)"]}
gpus_before:
  description: Every GPU as read before anything changed.
  returned: when the GPUs were read
  type: list
  elements: dict
  sample: [{"index": 0, "uuid": "GPU-1", "pci_bus_id": "00000000:1B:00.0", "persistence_mode": true}]
gpus:
  description: Per GPU its result - reset (the tool said so), present (listed after the reset) and a message.
  returned: always
  type: list
  elements: dict
  sample:
    - {"index": 0, "uuid": "GPU-1", "pci_bus_id": "00000000:1B:00.0", "persistence_mode": true,
       "reset": true, "present": true, "message": "reset; persistence mode off"}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.node.plugins.module_utils.gpu import gpu_reset


def main():
    module = AnsibleModule(argument_spec=gpu_reset.ARGUMENT_SPEC, supports_check_mode=True)
    module.exit_json(**gpu_reset.run(module))


if __name__ == "__main__":
    main()
