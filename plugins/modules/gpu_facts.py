#!/usr/bin/python
# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_facts
short_description: Gather NVIDIA GPU facts (identity, power, temperature, throttle reasons, topology)
version_added: "0.1.0"
description:
  - Runs C(nvidia-smi -q -x) once for every GPU's identity, power limits, temperatures, active clock
    event (throttle) reasons, ECC and row-remapping state, and C(nvidia-smi topo -m) for the PCIe/NVLink
    matrix, NUMA affinity, NVLink domains and the NICs nearest to each GPU.
  - Readings the GPU does not report (C(N/A), not supported, deprecated) are V(null), never V(0), so a
    gate can tell a missing reading from a zero one.
  - GPUs are listed in nvidia-smi index order. Identify them by C(uuid), which survives reboots
    and PCIe re-enumeration; the index and bus ID do not.
  - If C(topo -m) fails or its GPU count disagrees with C(-q -x), C(gpufleet_gpu_topology) is V(null) and
    the module warns; the other facts are still returned.
  - Changes nothing on the node.
options:
  judge:
    description:
      - Also judge what was read, as C(gpufleet facts) reports it, and return them in RV(checks),
        C(gpu_power.persistence_mode[<uuid>]), C(gpu_power.enforced_limit_w[<uuid>]) (the enforced
        power limit against the requested one) and C(thermal.clocks_event_reasons[<uuid>]) (no clock
        event reason that costs throughput), each by the same judge the roles and the gate use.
      - Never fails the module; a failed check is in RV(checks).
    type: bool
    default: false
extends_documentation_fragment: [gpufleet.node.nvidia_smi, gpufleet.node.attributes.facts,
  gpufleet.node.attributes]
notes:
  - Needs a loaded NVIDIA driver.
  - C(temperature.tlimit_c) is the margin to the GPU's slowdown temperature (T.Limit), not a temperature;
    it falls as the GPU heats up.
seealso:
  - name: nvidia-smi documentation
    description: Meaning of every field nvidia-smi reports.
    link: https://docs.nvidia.com/deploy/nvidia-smi/index.html
author:
  - gpufleet developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Gather GPU facts
  gpufleet.node.gpu_facts:

- name: Fail when any GPU's enforced power limit is below its default
  ansible.builtin.assert:
    that:
      - item.power.enforced_limit_w is not none
      - item.power.enforced_limit_w >= item.power.default_limit_w
    fail_msg: "GPU {{ item.index }} ({{ item.uuid }}) is capped at {{ item.power.enforced_limit_w }} W"
  loop: "{{ gpufleet_gpus }}"
  loop_control:
    label: "{{ item.uuid }}"

- name: Use an nvidia-smi outside PATH (driver container)
  gpufleet.node.gpu_facts:
    nvidia_smi_path: /run/nvidia/driver/usr/bin/nvidia-smi

- name: Show the GPUs of the first NVLink domain
  ansible.builtin.debug:
    msg: "{{ gpufleet_gpu_topology.nvlink_domains[0] | join(',') }}"
  when: gpufleet_gpu_topology is not none
"""

RETURN = r"""
extends_documentation_fragment: [gpufleet.node.added_facts]
checks:
  description:
    - With O(judge), one check per GPU condition (gpufleet's C({name, ok, value, limit, unit, message})).
  returned: when O(judge) is true
  type: list
  elements: dict
  sample: [{"name": "gpu_power.enforced_limit_w[GPU-3f5c1e2a-0d4b-5e6f-8a9b-0c1d2e3f4a5b]", "ok": false,
            "value": 1100.0, "limit": 1400.0, "unit": "W", "message": "..."}]
ansible_facts:
  contains:
    gpufleet_driver_version:
      description: NVIDIA driver version.
      returned: success
      type: str
      sample: "535.161.08"
    gpufleet_cuda_version:
      description: Highest CUDA version the driver supports.
      returned: success
      type: str
      sample: "12.2"
    gpufleet_gpus:
      description: One entry per GPU, in nvidia-smi index order.
      returned: success
      type: list
      elements: dict
      contains:
        index:
          description: nvidia-smi index (position in its output).
          type: int
          sample: 0
        uuid:
          description: GPU UUID, stable across reboots.
          type: str
          sample: GPU-ee7954ec-da95-fd7a-ddfd-c6b32cc2f8aa
        pci_bus_id:
          description: PCI bus ID as nvidia-smi prints it.
          type: str
          sample: "00000000:19:00.0"
        name:
          description: Product name.
          type: str
          sample: NVIDIA H100 80GB HBM3
        serial:
          description: Board serial number, or null.
          type: str
          sample: "1650124031592"
        persistence_mode:
          description: Whether persistence mode is on; null if unknown.
          type: bool
          sample: true
        mig_mode:
          description: Whether MIG mode is currently enabled; null where MIG is not supported.
          type: bool
          sample: false
        power:
          description: GPU power readings in watts; each is null when not reported.
          type: dict
          contains:
            draw_w:
              description: Power draw (1 s average on Ampere and newer, else instantaneous).
              type: float
              sample: 67.74
            requested_limit_w:
              description: Limit set by software (C(nvidia-smi -pl)).
              type: float
              sample: 700.0
            enforced_limit_w:
              description: Limit in force, the lowest of all limiters (for example a PDU power brake).
              type: float
              sample: 700.0
            default_limit_w:
              description: Default limit.
              type: float
              sample: 700.0
            min_limit_w:
              description: Lowest limit that can be set.
              type: float
              sample: 200.0
            max_limit_w:
              description: Highest limit that can be set.
              type: float
              sample: 700.0
          sample: {"draw_w": 67.74, "requested_limit_w": 700.0, "enforced_limit_w": 700.0,
                   "default_limit_w": 700.0, "min_limit_w": 200.0, "max_limit_w": 700.0}
        module_power:
          description:
            - Module power readings (GPU plus CPU and memory on Grace parts), same keys as
              RV(ansible_facts.gpufleet_gpus.power); all null elsewhere.
          type: dict
          sample: {"draw_w": null, "requested_limit_w": null, "enforced_limit_w": null,
                   "default_limit_w": null, "min_limit_w": null, "max_limit_w": null}
        temperature:
          description: Temperatures in degrees C; C(tlimit_c) is the margin to the slowdown temperature.
          type: dict
          sample: {"gpu_c": 29, "memory_c": 39, "tlimit_c": 56}
        clocks_event_reasons:
          description:
            - Active clock event (throttle) reasons, from C(gpu_idle), C(applications_clocks_setting),
              C(sw_power_cap), C(hw_slowdown), C(hw_thermal_slowdown), C(hw_power_brake_slowdown),
              C(sync_boost), C(sw_thermal_slowdown), C(display_clocks_setting).
          type: list
          elements: str
          sample: ["hw_slowdown", "hw_power_brake_slowdown"]
        ecc:
          description:
            - Uncorrected ECC errors (DRAM plus SRAM), since the last driver load (volatile) and over the
              GPU's life (aggregate).
          type: dict
          sample: {"volatile_uncorrected": 0, "aggregate_uncorrected": 0}
        remapped_rows:
          description: Row remapping state; a pending remap needs a GPU reset.
          type: dict
          sample: {"pending": false, "failure": false}
        retired_pages:
          description: Retired page counts (pre-Hopper GPUs); null where not reported.
          type: dict
          sample: {"single_bit": null, "double_bit": null, "pending": null}
    gpufleet_gpu_topology:
      description:
        - PCIe/NVLink topology from C(nvidia-smi topo -m), keyed by GPU UUID and NIC ibdev name.
        - Null when C(topo -m) failed or disagreed with the GPU list (a warning says which).
      returned: success
      type: dict
      contains:
        matrix:
          description: Link between every pair of devices, by their C(topo -m) names.
          type: dict
          sample: {"GPU0": {"GPU0": "X", "GPU1": "NV18", "NIC0": "PIX"}}
        nvlink_domains:
          description: Groups of GPU UUIDs connected by NVLink, in GPU index order.
          type: list
          elements: list
          sample: [["GPU-ee7954ec-da95-fd7a-ddfd-c6b32cc2f8aa", "GPU-47daa2ad-a218-6286-252b-af45f0dfaf00"]]
        gpus:
          description: Per GPU UUID, its place in the topology.
          type: dict
          sample:
            GPU-ee7954ec-da95-fd7a-ddfd-c6b32cc2f8aa:
              index: 0
              topo_name: GPU0
              pci_bus_id: "00000000:19:00.0"
              numa_node: 0
              gpu_numa_id: null
              cpu_affinity: "0-55"
              nearest_nics: ["mlx5_0"]
        nics:
          description:
            - Per NIC ibdev name, its C(topo -m) name, NUMA node (when the GPUs on its PCIe switch agree on
              one, else null) and the GPU UUIDs it is nearest to.
          type: dict
          sample:
            mlx5_0:
              topo_name: NIC0
              numa_node: 0
              nearest_gpus: ["GPU-ee7954ec-da95-fd7a-ddfd-c6b32cc2f8aa"]
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.node.plugins.module_utils.core import tool_runner
from ansible_collections.gpufleet.node.plugins.module_utils.core.results import HARMFUL_REASONS
from ansible_collections.gpufleet.node.plugins.module_utils.gpu.gpu_judge import (
    persistence_check,
    power_check,
)
from ansible_collections.gpufleet.node.plugins.module_utils.gpu.nvidia_smi import (
    ParseError,
    build_topology,
    parse_query_xml,
    parse_topo_matrix,
)
from ansible_collections.gpufleet.node.plugins.module_utils.thermal import thermal_verdict


def judged(gpus):
    """The checks gpufleet facts reports for the GPUs read, each by its one judge."""
    checks = []
    for gpu in gpus:
        power = gpu.get("power") or {}
        checks.append(persistence_check(gpu["uuid"], gpu.get("persistence_mode")))
        checks.append(
            power_check(
                {
                    "uuid": gpu["uuid"],
                    "enforced_limit_w": power.get("enforced_limit_w"),
                    "requested_limit_w": power.get("requested_limit_w"),
                }
            )
        )
    # no temperature limit given: only thermal.clocks_event_reasons[<uuid>] is judged
    return checks + (thermal_verdict.gpu_checks(gpus, {"forbidden_reasons": HARMFUL_REASONS}) if gpus else [])


def _query(module, smi):
    """The per-GPU facts; any failure here fails the module (without them there is nothing to report)."""
    return tool_runner.run_parsed(
        module,
        [smi, "-q", "-x"],
        parse_query_xml,
        "Check that the NVIDIA driver is loaded and that nvidia-smi works on this node.",
    )


def _topology(module, smi, gpus):
    """Topology is optional: on any problem warn and return None, never fail."""
    cmd = [smi, "topo", "-m"]
    rc, out, err = tool_runner.run(module, cmd, check=False)
    if rc != 0:
        module.warn(
            "nvidia-smi topo -m failed (rc=%d): %s; GPU topology left unset"
            % (rc, tool_runner.first_line(err, out))
        )
        return None
    try:
        topo = parse_topo_matrix(out)
    except ParseError as exc:
        module.warn("%s; GPU topology left unset" % exc)
        return None
    topology, warnings = build_topology(gpus, topo)
    for warning in warnings:
        module.warn(warning)
    return topology


def main():
    module = AnsibleModule(
        argument_spec=dict(nvidia_smi_path=dict(type="path"), judge=dict(type="bool", default=False)),
        supports_check_mode=True,
    )
    smi = tool_runner.nvidia_smi(module, module.params["nvidia_smi_path"])
    report = _query(module, smi)
    if report["attached_gpus"] is not None and report["attached_gpus"] != len(report["gpus"]):
        module.warn(
            "nvidia-smi reports %d attached GPUs but describes %d; check for a GPU that fell off the bus"
            % (report["attached_gpus"], len(report["gpus"]))
        )
    extra = dict(checks=judged(report["gpus"])) if module.params["judge"] else {}
    module.exit_json(
        changed=False,
        **extra,
        ansible_facts=dict(
            gpufleet_driver_version=report["driver_version"],
            gpufleet_cuda_version=report["cuda_version"],
            gpufleet_gpus=report["gpus"],
            gpufleet_gpu_topology=_topology(module, smi, report["gpus"]),
        ),
    )


if __name__ == "__main__":
    main()
