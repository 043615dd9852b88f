#!/usr/bin/python
# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_pinning
short_description: Pin inference instances to GPUs by UUID, grouped by NVLink domain
version_added: "0.1.0"
description:
  - For each instance writes C(<env_dir>/<name>.env), an EnvironmentFile with
    C(CUDA_VISIBLE_DEVICES=GPU-<uuid>,...) (full UUIDs in PCI bus ID order), C(CUDA_DEVICE_ORDER=PCI_BUS_ID)
    and C(NCCL_TOPO_FILE). C(NCCL_GRAPH_FILE) is never set.
  - An instance takes the GPUs of an NVLink domain (O(instances[].nvlink_domain)) or GPUs named by UUID
    (O(instances[].gpus)). Domains come from C(nvidia-smi topo -m) and are numbered as nvidia-smi lists
    them, so domain 0 is the one holding GPU 0.
  - Because the files name GPUs by UUID, a PCIe re-enumeration that swaps bus IDs leaves them as they
    are, and each instance keeps its physical GPUs.
  - Every instance is planned before any file is written. A domain with fewer GPUs than an instance
    needs (a GPU fell off the bus), a GPU that is not on the node, or a GPU claimed twice fails the
    module and writes nothing; the message names the instance, the domain and how many GPUs are missing.
  - Files of instances that are not listed are left alone.
options:
  instances:
    description: The instances to pin.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: Instance name; the file is C(<env_dir>/<name>.env).
        type: str
        required: true
      nvlink_domain:
        description: Index of the NVLink domain whose GPUs the instance gets.
        type: int
      gpus:
        description: GPU UUIDs (C(GPU-...)) the instance gets.
        type: list
        elements: str
      gpu_count:
        description:
          - GPUs the instance needs from its NVLink domain (the first ones by PCI bus ID).
          - Defaults to O(gpu_count).
        type: int
  gpu_count:
    description: GPUs an instance on an NVLink domain needs, unless it sets its own O(instances[].gpu_count).
    type: int
    default: 8
  env_dir:
    description: Directory of the EnvironmentFiles; created (mode 0755) when missing.
    type: path
    default: /etc/gpufleet/instances
  nccl_topo_file:
    description: The NCCL topology file the instances read (C(NCCL_TOPO_FILE)).
    type: path
    default: /etc/nccl/topo.xml
extends_documentation_fragment: [gpufleet.node.nvidia_smi, gpufleet.node.attributes.writes,
  gpufleet.node.attributes]
attributes:
  check_mode:
    details: Plans and compares; writes nothing.
  diff_mode:
    details: One diff per instance file.
notes:
  - Runs C(nvidia-smi --query-gpu=index,uuid,pci.bus_id,compute_cap --format=csv,noheader) and
    C(nvidia-smi topo -m) with C(LC_ALL=C).
seealso:
  - name: CUDA environment variables
    description: CUDA_VISIBLE_DEVICES by UUID and CUDA_DEVICE_ORDER.
    link: https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#env-vars
author:
  - gpufleet developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: One instance per NVLink baseboard
  gpufleet.node.gpu_pinning:
    instances:
      - name: glm52
        nvlink_domain: 0
      - name: kimik3
        nvlink_domain: 1

- name: A small instance on two named GPUs
  gpufleet.node.gpu_pinning:
    instances:
      - name: embed
        gpus:
          - GPU-3f5c1e2a-0d4b-5e6f-8a9b-0c1d2e3f4a5b
          - GPU-47daa2ad-a218-6286-252b-af45f0dfaf00
"""

RETURN = r"""
extends_documentation_fragment: [gpufleet.node.checks]
changes:
  description:
    - One C(gpu_pinning.instance[<name>]) entry per file that changed (would change in check mode);
      from and to are the file's variables (from is null when there was no file).
  returned: always
  type: list
  elements: dict
  sample: [{"setting": "gpu_pinning.instance[glm52]", "from": null,
            "to": {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "GPU-3f5c...,GPU-47da...",
                   "NCCL_TOPO_FILE": "/etc/nccl/topo.xml"}}]
checks:
  description: Always empty; the plan is refused before writing instead.
  sample: []
hints:
  description: Nothing to look at for this module; always empty.
  returned: always
  type: list
  elements: str
  sample: []
reboot_required:
  description: Always false; instances read the files when they start.
  returned: always
  type: bool
  sample: false
instances:
  description: Per instance, its GPUs (UUIDs in PCI bus order), NVLink domain, file and CUDA_VISIBLE_DEVICES.
  returned: success
  type: dict
  sample:
    glm52:
      gpus: ["GPU-3f5c1e2a-0d4b-5e6f-8a9b-0c1d2e3f4a5b"]
      nvlink_domain: 0
      path: /etc/gpufleet/instances/glm52.env
      cuda_visible_devices: GPU-3f5c1e2a-0d4b-5e6f-8a9b-0c1d2e3f4a5b
"""

from ansible_collections.gpufleet.node.plugins.module_utils.core.role_module import run
from ansible_collections.gpufleet.node.plugins.module_utils.gpu import gpu_pinning as role


def main():
    run(role)


if __name__ == "__main__":
    main()
