#!/usr/bin/python
# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: node_health
short_description: Judge the hardware faults maintenance leaves behind (GPUs, PCIe, memory, NVLink, Xid, DCGM)
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
  - The NVSwitch fabric - each GPU's fabric registration from the same C(-q -x)
    (C(health.fabric_manager[<uuid>]) - Completed with Success passes; not judged on a GPU on no NVSwitch
    fabric) and the NVSwitch SXid lines of the kernel log (C(health.sxid[<switch bus id>]) - one the driver
    calls Fatal, or whose severity no line says, blocks). With O(nvlink), C(nvidia-smi nvlink -e) is read
    too; its counters are judged over the burn-in's load and the watch window
    (C(health.nvlink_errors[<uuid>])).
  - With O(dcgm_diag_level) 1-4, also runs DCGM's diagnostic (C(dcgmi diag -r N -j)) and judges each of its
    tests (C(health.dcgm_diag[<test>])) - a failed test fails naming the GPUs DCGM names (index, UUID, bus
    id), DCGM's message, what it usually means and what to do; a test that warns is reported and does not
    block; C(health.dcgm_diag) fails when DCGM could not run the diagnostic. The gate runs it on the drained
    node; C(gpufleet watch) never does (from level 2 it loads the GPUs for minutes).
  - With O(gpudirect_rdma), judges GPUDirect RDMA's host pieces - the C(nvidia_peermem) module loaded
    (C(health.nvidia_peermem), from C(/sys/module/nvidia_peermem/initstate)) and ACS off on every PCIe switch
    port (C(health.acs[<bdf>]), from C(lspci -D -vvv)'s C(ACSCtl) lines; root ports are not judged). Each
    unit of O(expected_services) must be active (C(health.service[<unit>]), one C(systemctl is-active)).
    mlx5_core firmware errors in the kernel log (the health poller's C(health compromised), C(Health issue
    observed), C(synd), C(Fatal error) lines) fail C(fabric.mlx5_firmware[<dev>]) per RDMA device.
  - The PCIe generation is not judged here - a healthy idle GPU lowers its link to Gen1 to save power. The
    burn-in judges it under load.
  - The node's remediation history (O(history_path)) - C(guardian.replace_hardware) fails while the node is
    marked "replace hardware" by C(gpufleet watch --act), naming the failure class, when it was marked and
    C(gpufleet release) as what clears it, so the gate never returns such a node. Not a family a profile
    turns off.
  - Fails when a check fails, naming each with its value, limit and what to do; the checks are in the
    failed result too. A tool that is missing or prints something unreadable fails the module, naming it
    (C(dcgmi) too when a diagnostic level is set - fail closed).
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
  dcgm_diag_level:
    description:
      - DCGM's diagnostic level to run (C(dcgmi diag -r N -j)) - C(0) does not run it; C(1) the deployment
        checks (about a minute); C(2) adds PCIe/NVLink and GPU memory (minutes); C(3) the stress, power and
        compute tests (about 30 minutes); C(4) memtest and the pulse test (1.5-2 hours).
      - Needs DCGM on the node (C(dcgmi) and a running C(nv-hostengine)). Not run in check mode.
    type: int
    default: 0
  dcgmi_path:
    description: Path of C(dcgmi) on the node; unset, the one on PATH.
    type: path
  dcgm_diag_timeout_s:
    description:
      - Seconds the diagnostic may run before it is stopped and the module fails (60-86400); unset, by level
        (600, 1800, 5400, 14400 s).
    type: int
  gpudirect_rdma:
    description:
      - Judge nvidia_peermem and the PCIe switch ports' ACS - C(auto) where the node has RDMA devices (sysfs
        C(class/infiniband)), C(yes) always, C(no) never. Needs C(lspci) (pciutils) where judged.
    type: str
    choices: [auto, "yes", "no"]
    default: auto
  expected_services:
    description:
      - systemd units that must be active (for example C(nvidia-fabricmanager.service) on an HGX baseboard,
        C(nvidia-dcgm.service) where DCGM runs, C(nvidia-imex.service) where IMEX is used).
    type: list
    elements: str
    default: []
  turned_off:
    description:
      - Check families the profile does not judge, each with the reason the report shows (for example
        C(health.nvlink) with the reason C(PCIe-only H100 NVL cards)). Allowed families are the check names
        above without their C([...]).
    type: dict
    default: {}
extends_documentation_fragment: [gpufleet.node.nvidia_smi, gpufleet.node.remediation_history,
  gpufleet.node.attributes.read_only, gpufleet.node.attributes]
attributes:
  check_mode:
    details:
      - Only reads; the same readings and checks in check mode, except DCGM's diagnostic, which is not run
        (from level 2 it loads the GPUs).
notes:
  - DCGM's GPU ids are NVML's indices, the order of C(nvidia-smi -q -x); the messages name each GPU by both.
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

- name: The gate on a drained node, with DCGM's medium diagnostic (PCIe, NVLink, GPU memory)
  gpufleet.node.node_health:
    expected_gpu_count: 8
    dcgm_diag_level: 2
"""

RETURN = r"""
# changes (always empty) and the type of checks: the no_changes and checks fragments
extends_documentation_fragment: [gpufleet.node.no_changes, gpufleet.node.checks]
checks:
  description: The health checks (see the description), each with name, ok, value, limit, unit and message.
  sample:
    - {"name": "health.pcie_width[GPU-5d3f…]", "ok": false, "value": 8, "limit": 16, "unit": "lanes",
       "message": "GPU-5d3f… (00000000:3A:00.0) PCIe link x8 of x16: degraded, usually a GPU or riser not
       fully seated, or a damaged slot; reseat it and check the slot"}
gpus:
  description: Per GPU the readings judged (index, uuid, pci_bus_id, pcie, remapped_rows, ecc, retired_pages).
  returned: always
  type: list
  elements: dict
dcgm_diag:
  description:
    - DCGM's diagnostic as read (level, rc, version, driver_version, tests with their per-GPU results, gpus,
      failed, passed, warned, runtime_error). Null when not run.
  returned: always
  type: dict
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
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.node.plugins.module_utils.core.inputs import refuse_bad_input
from ansible_collections.gpufleet.node.plugins.module_utils.core.tool_runner import nvidia_smi, tool_path
from ansible_collections.gpufleet.node.plugins.module_utils.node import gpudirect, remediation_history
from ansible_collections.gpufleet.node.plugins.module_utils.node.node_health import (
    OPTIONS_SPEC,
    ReadError,
    diag_input_errors,
    input_errors,
    judge,
    limits_from,
    read,
    read_diag,
)


def _dcgmi(module, path, level):
    """dcgmi (dcgmi_path, else on PATH); a level set without it fails closed, naming the tool."""
    if path:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
        problem = "is not an executable file at %s" % path
    else:
        found = module.get_bin_path("dcgmi")
        if found:
            return found
        problem = "is not installed (not on PATH)"
    module.fail_json(
        msg="dcgmi %s on this node, and thermal_gate_dcgm_diag_level is %d: install DCGM (dcgmi, "
        "nv-hostengine) or fix thermal_gate_dcgmi_path, or set the level to 0 not to run the diagnostic "
        "(fail closed)" % (problem, level),
        checks=[],
        changes=[],
    )


def main():
    module = AnsibleModule(
        argument_spec=dict(
            kernel_log=dict(type="bool", default=True),
            nvidia_smi_path=dict(type="path"),
            # the gate's only: the watch shares OPTIONS_SPEC and must not load serving GPUs
            dcgm_diag_level=dict(type="int", default=0),
            dcgmi_path=dict(type="path"),
            dcgm_diag_timeout_s=dict(type="int"),
            gpudirect_rdma=dict(type="str", choices=list(gpudirect.GPUDIRECT_CHOICES), default="auto"),
            expected_services=dict(type="list", elements="str", default=[]),
            **OPTIONS_SPEC,
            **remediation_history.OPTIONS_SPEC,
        ),
        supports_check_mode=True,
    )
    p = module.params
    errors = input_errors(p, "thermal_gate_health_") + diag_input_errors(
        p["dcgm_diag_level"], p["dcgm_diag_timeout_s"]
    )
    errors.extend(gpudirect.unit_errors(p["expected_services"]))
    refuse_bad_input(module, "judge the node's health", errors)
    result = dict(changed=False, checks=[], gpus=[], xids=None, dcgm_diag=None, changes=[])
    smi = nvidia_smi(module, p["nvidia_smi_path"])
    dmesg = tool_path(module, "dmesg") if p["kernel_log"] else None
    level = 0 if module.check_mode else p["dcgm_diag_level"]
    dcgmi = _dcgmi(module, p["dcgmi_path"], level) if level else None
    try:
        readings = read(module.run_command, smi, dmesg, p["nvlink"])
        readings["gpudirect"] = gpudirect.read(
            module.run_command,
            p["gpudirect_rdma"],
            tool_path(module, "lspci", required=False)
            if gpudirect.judged(p["gpudirect_rdma"], gpudirect.rdma_devices())
            else None,
            tool_path(module, "systemctl", required=False) if p["expected_services"] else None,
            p["expected_services"],
        )
    except (ReadError, gpudirect.ReadError) as exc:
        module.fail_json(msg="%s; run it by hand on this node to see why (fail closed)" % exc, **result)
    # the replace-hardware mark (guardian.replace_hardware): one small file read, read-only
    readings["history"] = remediation_history.reading(p["history_path"], p["node_name"])
    diag_error = None
    if dcgmi:
        try:
            readings["diag"] = read_diag(
                module.run_command, dcgmi, level, p["dcgm_diag_timeout_s"], tool_path(module, "timeout")
            )
        except ReadError as exc:
            diag_error = str(exc)
    checks = judge(readings, p["expected_gpu_count"], limits_from(p), p["turned_off"])
    result.update(
        checks=checks,
        gpus=readings["gpus"],
        xids=readings["xids"],
        dcgm_diag=readings.get("diag"),
        # the versions the controller compares across the nodes of a profile (gpufleet.node.fleet_versions)
        ansible_facts={"gpufleet_versions": readings["versions"]},
    )
    if diag_error:
        # the other checks are judged and reported; the node is blocked on the diagnostic it could not read
        module.fail_json(
            msg="%s; run it by hand on this node to see why (fail closed)" % diag_error, **result
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
