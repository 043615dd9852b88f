#!/usr/bin/python
# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_power
short_description: Keep NVIDIA GPUs in persistence mode at their power limits
version_added: "0.1.0"
description:
  - Reads every GPU with C(nvidia-smi -q -x), works out the power limit each must enforce
    (O(limit_w), or the GPU's override in O(limits), or its default limit), and refuses the whole run,
    before changing anything, when any target is outside that GPU's [min, max] range. The message
    names the GPU UUID, the target and the allowed range.
  - Persistence first. When the node has the driver's C(nvidia-persistenced) unit, it is enabled and
    started (restarted if it runs while a GPU is not in persistence mode). Only when the node has no
    such unit is persistence set with C(nvidia-smi -i <uuid> -pm 1); the result says so in
    RV(persistence_method), a warning and a hint.
  - Then every GPU whose enforced or requested limit differs from its target gets
    C(nvidia-smi -i <uuid> -pl <watts>). Afterwards the GPUs are read again and the module fails if a
    GPU does not enforce its target or is not in persistence mode.
  - A GPU enforcing less than software requested is being capped from outside the driver (a PDU
    protection or power brake); the result carries a hint that the rack's power budget may be the cause.
  - Returns the gpufleet report keys C(changes), C(checks), C(hints) and C(reboot_required).
options:
  limit_w:
    description:
      - Power limit in watts for every GPU without an entry in O(limits).
      - When not set, each GPU's default limit (C(Default Power Limit)).
    type: float
  limits:
    description:
      - Per-GPU overrides, GPU UUID (C(GPU-...), as C(nvidia-smi -L) prints it) to watts.
      - An override for a GPU this node does not have is ignored with a warning.
    type: dict
    default: {}
  persistence:
    description:
      - Whether to put every GPU in persistence mode (see the description for how).
      - V(false) leaves persistence as it is.
    type: bool
    default: true
  persistenced_unit:
    description: The driver's persistence daemon unit.
    type: str
    default: nvidia-persistenced.service
  boot_unit:
    description:
      - Write the boot path that re-applies and verifies the limits at every boot - the limits by UUID
        (C(/etc/gpufleet/gpu-power.conf)), the script that applies them
        (C(/usr/local/sbin/gpufleet-gpu-power),
        checked with C(sh -n) before it replaces the old one) and C(gpufleet-gpu-power.service) - and enable
        the unit (C(systemctl daemon-reload) when the unit file changed, C(systemctl enable)).
      - Each file starts with C(# managed by gpufleet.node.gpu_power; edits are overwritten); they are
        changes named C(gpu_power.boot_file[<path>]), C(gpu_power.boot_file_mode[<path>]) and
        C(gpu_power.boot_unit_enabled[<unit>]), as C(gpufleet drift) names them.
      - V(false) leaves them as they are.
    type: bool
    default: true
  boot_before:
    description: Units the boot unit must finish before (C(Before=)), such as the inference units.
    type: list
    elements: str
    default: []
extends_documentation_fragment: [gpufleet.node.nvidia_smi, gpufleet.node.attributes.writes,
  gpufleet.node.attributes]
attributes:
  check_mode:
    details: Reads the GPUs and the daemon's unit, reports in RV(changes) exactly what a run would change.
  diff_mode:
    details: Per GPU, the enforced limit and persistence mode before and after.
notes:
  - Commands run as argument lists with C(LC_ALL=C); needs root.
  - C(nvidia-smi -pl) is lost at every reboot and driver reload; the boot unit (O(boot_unit)) re-applies the
    limits this module returns in RV(limits).
seealso:
  - name: nvidia-smi documentation
    description: C(-pl) and C(-pm), and the meaning of enforced versus requested power limits.
    link: https://docs.nvidia.com/deploy/nvidia-smi/index.html
  - name: NVIDIA persistence daemon
    description: Why persistence mode should come from nvidia-persistenced rather than C(-pm 1).
    link: https://docs.nvidia.com/deploy/driver-persistence/index.html
author:
  - gpufleet developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Every GPU at 1400 W, persistence from nvidia-persistenced
  gpufleet.node.gpu_power:
    limit_w: 1400

- name: 1400 W except one GPU that runs hot
  gpufleet.node.gpu_power:
    limit_w: 1400
    limits:
      GPU-3f5c1e2a-0d4b-5e6f-8a9b-0c1d2e3f4a5b: 1200

- name: Back to each GPU's default limit, leave persistence alone
  gpufleet.node.gpu_power:
    persistence: false
"""

RETURN = r"""
extends_documentation_fragment: [gpufleet.node.checks]
changes:
  description:
    - What changed (in check mode, what would change), one entry per setting.
    - Settings are C(gpu_power.enforced_limit_w[<uuid>]) (C(gpu_power.requested_limit_w[<uuid>]) when only
      the request differs), C(gpu_power.persistence_mode[<uuid>]), C(gpu_power.nvidia_persistenced.enabled)
      and C(gpu_power.nvidia_persistenced.active).
  returned: always
  type: list
  elements: dict
  sample: [{"setting": "gpu_power.enforced_limit_w[GPU-3f5c1e2a-0d4b-5e6f-8a9b-0c1d2e3f4a5b]",
            "from": 1100.0, "to": 1400.0}]
checks:
  description:
    - After a run (not in check mode), per GPU the enforced limit against its target
      (C(gpu_power.enforced_limit_w[<uuid>])) and persistence mode (C(gpu_power.persistence_mode[<uuid>])).
  sample: [{"name": "gpu_power.enforced_limit_w[GPU-3f5c1e2a-0d4b-5e6f-8a9b-0c1d2e3f4a5b]", "ok": true,
            "value": 1400.0, "limit": 1400.0, "unit": "W", "message": "enforces its target"}]
hints:
  description: What an operator should look at (a limit capped from outside the driver, the -pm fallback).
  returned: always
  type: list
  elements: str
  sample: ["16 GPUs enforce less than the requested limit (GPU-3f5c...: 1100 W < 1400 W): the rack's power
            budget (a PDU protection) may be capping them."]
reboot_required:
  description: Always false; power limits and persistence take effect at once.
  returned: always
  type: bool
  sample: false
limits:
  description: The limit each GPU must enforce, by UUID (what the boot unit re-applies).
  returned: success
  type: dict
  sample: {"GPU-3f5c1e2a-0d4b-5e6f-8a9b-0c1d2e3f4a5b": 1400.0}
persistence_method:
  description:
    - V(nvidia-persistenced) when the daemon's unit keeps persistence, V(nvidia-smi) when the fallback
      C(-pm 1) was (or would be) used, V(unmanaged) when O(persistence=false).
  returned: success
  type: str
  sample: nvidia-persistenced
nvidia_smi:
  description: The nvidia-smi binary used.
  returned: success
  type: str
  sample: /usr/bin/nvidia-smi
gpus:
  description: Per GPU after the run (in check mode, as found), in nvidia-smi order.
  returned: success
  type: list
  elements: dict
  sample: [{"uuid": "GPU-3f5c1e2a-0d4b-5e6f-8a9b-0c1d2e3f4a5b", "pci_bus_id": "00000000:13:00.0",
            "target_w": 1400.0, "enforced_w": 1400.0, "requested_w": 1400.0, "min_w": 200.0,
            "max_w": 1400.0, "persistence_mode": true}]
"""

from ansible_collections.gpufleet.node.plugins.module_utils.core.role_module import run
from ansible_collections.gpufleet.node.plugins.module_utils.gpu import gpu_power as role


def main():
    run(role)


if __name__ == "__main__":
    main()
