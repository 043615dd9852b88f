#!/usr/bin/python
# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: node_health
short_description: Judge the hardware faults maintenance leaves behind (GPU count, PCIe, memory, NVLink, Xid)
version_added: "0.1.0"
description:
  - Reads C(nvidia-smi -q -x) once, C(nvidia-smi nvlink -s) (with O(nvlink)) and the kernel log (C(dmesg),
    with O(kernel_log)), and judges, per GPU by UUID - the GPU count against O(expected_gpu_count)
    (C(health.gpu_count)); the PCIe link width against its maximum (C(health.pcie_width[<uuid>])); a row
    remap pending or failed (C(health.row_remap_pending[<uuid>]), C(health.row_remap_failure[<uuid>]));
    uncorrectable ECC errors (C(health.ecc_uncorrectable[<uuid>]), and with a limit the lifetime count
    C(health.ecc_uncorrectable_aggregate[<uuid>])); every NVLink link active (C(health.nvlink[<uuid>]));
    Xid events since boot (C(health.xid[<bus id>])), blocking or warning by gpufleet's Xid table
    (docs/health-checks.md).
  - The PCIe generation is not judged here - a healthy idle GPU lowers its link to Gen1 to save power. The
    burn-in judges it under load.
  - Fails when a check fails, naming each with its value, limit and what to do; the checks are in the
    failed result too. A tool that is missing or prints something unreadable fails the module, naming it.
  - Changes nothing.
options:
  expected_gpu_count:
    description: How many GPUs the node's profile has (C(gpufleet_expected_gpu_count)); unset, not judged.
    type: int
  nvlink:
    description: The profile's GPUs are joined by NVLink - read C(nvidia-smi nvlink -s) and judge every link.
    type: bool
    default: true
  kernel_log:
    description: Read the kernel log (C(dmesg)) for Xid events since boot.
    type: bool
    default: true
  max_volatile_uncorrectable_ecc:
    description: Most uncorrectable ECC errors since the driver loaded (volatile) a GPU may have.
    type: int
    default: 0
  max_aggregate_uncorrectable_ecc:
    description:
      - Most lifetime (aggregate) uncorrectable ECC errors a GPU may have. Unset, not judged - a GPU whose
        bad rows were remapped keeps its count and is healthy.
    type: int
  turned_off:
    description:
      - Check families the profile does not judge, each with the reason the report shows (for example
        C(health.nvlink) with the reason C(PCIe-only H100 NVL cards)). Allowed families are the check names
        above without their C([...]).
    type: dict
    default: {}
extends_documentation_fragment:
  - gpufleet.node.nvidia_smi
  - gpufleet.node.attributes.read_only
attributes:
  check_mode:
    details: Only reads; the same readings and checks in check mode.
notes:
  - C(dmesg) needs root (kernel.dmesg_restrict); its ring buffer holds the log since boot unless it wrapped.
seealso:
  - module: gpufleet.node.burn_in
  - module: gpufleet.node.thermal_gate
  - name: NVIDIA Xid catalog
    description: What each Xid means.
    link: https://docs.nvidia.com/deploy/xid-errors/index.html
author:
  - gpufleet developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Judge the node's GPUs before any instance starts
  gpufleet.node.node_health:
    expected_gpu_count: 16

- name: A PCIe-only node (no NVLink), lifetime ECC errors judged too
  gpufleet.node.node_health:
    expected_gpu_count: 8
    max_aggregate_uncorrectable_ecc: 10
    turned_off:
      health.nvlink: PCIe-only cards
"""

RETURN = r"""
checks:
  description: The health checks (see the description), each with name, ok, value, limit, unit and message.
  returned: always
  type: list
  elements: dict
  sample:
    - {"name": "health.pcie_width[GPU-5d3f…]", "ok": false, "value": 8, "limit": 16, "unit": "lanes",
       "message": "GPU-5d3f… (00000000:3A:00.0) PCIe link x8 of x16: degraded, usually a GPU or riser not
       fully seated, or a damaged slot; reseat it and check the slot"}
gpus:
  description: Per GPU the readings judged (index, uuid, pci_bus_id, pcie, remapped_rows, ecc, retired_pages).
  returned: always
  type: list
  elements: dict
xids:
  description:
    - The Xid events of the kernel log (xid, pci_bus_id, pid, process, message, timestamp).
    - Null when the log was not read.
  returned: always
  type: list
  elements: dict
ansible_facts:
  description: The versions that must match across the nodes of a profile.
  returned: when the GPUs were read
  type: dict
  contains:
    gpufleet_versions:
      description:
        - C(gpu_product) and C(gpu_count) (what makes nodes peers), C(driver), C(cuda), C(vbios) (the
          GPUs' distinct VBIOS versions) and C(nic_firmware) (the RDMA devices' distinct C(fw_ver)).
      type: dict
changes:
  description: Always empty; the module changes nothing.
  returned: always
  type: list
  elements: dict
  sample: []
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.node.plugins.module_utils.node_health import (
    OPTIONS_SPEC,
    ReadError,
    input_errors,
    judge,
    limits_from,
    read,
)
from ansible_collections.gpufleet.node.plugins.module_utils.tool_runner import nvidia_smi, tool_path


def main():
    module = AnsibleModule(
        argument_spec=dict(
            kernel_log=dict(type="bool", default=True),
            nvidia_smi_path=dict(type="path"),
            **OPTIONS_SPEC,
        ),
        supports_check_mode=True,
    )
    p = module.params
    errors = input_errors(p, "thermal_gate_health_")
    if errors:
        module.fail_json(msg="Refusing to judge the node's health: %s." % "; ".join(errors), input_error=True)
    result = dict(changed=False, checks=[], gpus=[], xids=None, changes=[])
    smi = nvidia_smi(module, p["nvidia_smi_path"])
    dmesg = tool_path(module, "dmesg") if p["kernel_log"] else None
    try:
        readings = read(module.run_command, smi, dmesg, p["nvlink"])
    except ReadError as exc:
        module.fail_json(msg="%s; run it by hand on this node to see why (fail closed)" % exc, **result)
    checks = judge(readings, p["expected_gpu_count"], limits_from(p), p["turned_off"])
    result.update(
        checks=checks,
        gpus=readings["gpus"],
        xids=readings["xids"],
        # the versions the controller compares across the nodes of a profile (gpufleet.node.fleet_versions)
        ansible_facts={"gpufleet_versions": readings["versions"]},
    )
    failed = [c for c in checks if not c["ok"]]
    if failed:
        module.fail_json(
            msg="node health: %d of %d checks failed: %s"
            % (len(failed), len(checks), "; ".join(c["message"] for c in failed[:6])),
            **result,
        )
    module.exit_json(msg="node health: %d checks passed" % len(checks), **result)


if __name__ == "__main__":
    main()
