#!/usr/bin/python
# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: node_facts
short_description: Compare every gpufleet role's desired state with the node in one call (drift)
version_added: "0.2.0"
description:
  - Runs, on the node, the read and plan of each role given - C(rdma_link), C(rdma_qos), C(gpu_power),
    C(nccl_topology), C(gpu_pinning) - with the same code, commands, setting names and messages as the
    role's own module in check mode (each role's logic lives once, in its module_utils file). So RV(changes)
    holds the same C({setting, from, to}) entries that C(gpufleet provision --check) reports, the boot
    files of C(rdma_link), C(rdma_qos) and C(gpu_power) included (C(<role>.boot_file[<path>]),
    C(<role>.boot_file_mode[<path>]), C(<role>.boot_unit_enabled[<unit>])).
  - Writes nothing. It exists so that a fleet-wide drift check costs one module run per node, not one task
    per role and setting.
  - Each role's options are its module's options, validated by that module's own argument spec and input
    rules; bad input fails the module before anything is read. C(playbooks/drift.yml) passes each role's
    C(__<role>_options), the arguments its C(configure) task gives its module.
  - A role whose comparison cannot be made (no GPUs, a GPU missing for an instance, an interface that is
    not there) is reported in RV(roles) with its error and the module fails. A link that is down is a
    failed check in RV(checks), not a change.
options:
  rdma_link:
    description:
      - The options of M(gpufleet.node.rdma_link); the role is compared when given.
    type: dict
  rdma_qos:
    description:
      - The options of M(gpufleet.node.rdma_qos); the role is compared when given.
    type: dict
  fabric:
    description:
      - The options of M(gpufleet.node.fabric) (cabling plan, the leaves' readings, the host's side); its
        checks are judged when given.
    type: dict
  gpu_power:
    description:
      - The options of M(gpufleet.node.gpu_power); the role is compared when given.
    type: dict
  nccl_topology:
    description: The options of M(gpufleet.node.nccl_topology); the role is compared when given.
    type: dict
  gpu_pinning:
    description:
      - The options of M(gpufleet.node.gpu_pinning); the role is compared when given.
    type: dict
  report_changes:
    description:
      - Return the planned changes and checks in RV(changes) and RV(checks) (drift). V(false) leaves them
        in RV(roles) only, but for the checks of a role that could not be planned - the judgement
        provision and the gate make before they change anything, whose own tasks then report the rest.
    type: bool
    default: true
  drain_record:
    description:
      - The record the drain role leaves on a node it took out of service (removed when it returns it).
        When given and present, the node carries the failed check C(drain.left_drained) - a run drained it
        and did not return it (interrupted, or a role failed) - so the next run names it.
    type: path
  drain_scheduler:
    description:
      - The node in its scheduler, C({method, node_name}). With method V(slurm) and no record on the node,
        C(scontrol show node <node_name>) runs on the node, and a node Slurm shows drained for a reason that
        names gpufleet carries C(drain.left_drained) too (a run killed after the drain lost its record).
    type: dict
  fabric_stops:
    description:
      - A failed fabric check (the cabling, a leaf's side of a link, a leaf that was not read) fails the
        module, naming them. The gate and C(drift --fix) judge so before the drain, since nothing they
        change on the node fixes those.
    type: bool
    default: false
  versions:
    description:
      - Also read the node's driver, CUDA, VBIOS and NIC firmware (one C(nvidia-smi -q -x), the RDMA devices'
        sysfs C(fw_ver)), beside the roles' reads, into the C(gpufleet_versions) fact that
        M(gpufleet.node.node_health) sets. C(gpufleet drift) compares them across the run's nodes on the
        controller and names the odd node out (C(fleet.versions[<field>])).
      - A node whose versions cannot be read (the tool missing or failing, or an output refused as
        unreadable) carries the failed check C(fleet.versions) naming the tool and why, and the module
        fails with that message.
      - The nvidia-smi is C(gpu_power)'s C(nvidia_smi_path) when given, else the one on PATH.
    type: bool
    default: false
  known_versions:
    description:
      - With O(versions), the fleet's known versions (the inventory's C(thermal_gate_fleet_versions), per GPU
        product some of C(driver), C(cuda), C(vbios), C(nic_firmware)), returned as the
        C(gpufleet_known_versions) fact so that C(gpufleet drift) judges a node with fewer than three peers
        of its GPU product in the run against them, as the gate does (M(gpufleet.node.fleet_versions)).
      - An entry of another shape is refused as a configuration error, naming it.
    type: dict
  plan_failures_stop:
    description:
      - A role that cannot be planned on this node (its module fails, e.g. a GPU gone from its NVLink
        domain) fails the module. The gate turns it off before its drain - a node whose hardware
        fails is drained and blocked there, its instances stopped, by the gate's own steps - and keeps
        stopping only for what no step fixes, a configuration error (input_error) or the fabric.
    type: bool
    default: true
extends_documentation_fragment: [gpufleet.node.attributes.read_only, gpufleet.node.attributes]
attributes:
  check_mode:
    details: Never writes, in or out of check mode.
notes:
  - Runs the same commands as the role modules in check mode, each once (C(nvidia-smi -q -x),
    C(nvidia-smi topo -m), C(mlxconfig -d <pci> q), C(mlnx_qos -i <if>), C(ethtool -a <if>),
    C(systemctl show <unit>), C(systemctl is-enabled <boot unit>)), with C(LC_ALL=C).
  - Like M(gpufleet.node.rdma_link) in check mode, creates a missing rdma_cm configfs group to read the RoCE
    defaults (a view; no setting changes).
seealso:
  - module: gpufleet.node.rdma_link
  - module: gpufleet.node.rdma_qos
  - module: gpufleet.node.gpu_power
  - module: gpufleet.node.nccl_topology
  - module: gpufleet.node.gpu_pinning
author:
  - gpufleet developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Compare the fabric roles with the node (options as the roles give their modules)
  gpufleet.node.node_facts:
    rdma_link:
      min_speed_gbps: 400
    rdma_qos:
      trust: dscp
      pfc_priorities: [3]
      ecn_priorities: [3]
      cnp_dscp: 48
      global_pause: false
  register: drift
"""

RETURN = r"""
extends_documentation_fragment: [gpufleet.node.checks]
changes:
  description:
    - Every drifted setting of every role, in role order, as the role modules name them; then, per role,
      its boot files as provision's report names them.
  returned: always
  type: list
  elements: dict
  sample: [{"setting": "rdma_qos.pfc[ens21np0]", "from": [], "to": [3]},
           {"setting": "gpu_power.boot_file[/etc/gpufleet/gpu-power.conf]", "from": "sha256:3b1f0c9a2d4e5f60",
            "to": "sha256:9e8d7c6b5a493827"}]
checks:
  description: Verifications that configuration cannot fix (RDMA link state and speed, a node left drained).
  sample: [{"name": "rdma_link.link_state[mlx5_3]", "ok": false, "value": "DOWN", "limit": "ACTIVE",
            "unit": "", "message": "mlx5_3 (ens39np0) link is DOWN ..."}]
ansible_facts:
  description: With O(versions), the versions the controller compares across the run's nodes.
  returned: when O(versions) is true and they could be read
  type: dict
  contains:
    gpufleet_versions:
      description:
        - C(gpu_product) and C(gpu_count) (who the node's peers are), C(driver), C(cuda), C(vbios) (the GPUs'
          distinct VBIOS versions) and C(nic_firmware) (the RDMA devices' distinct C(fw_ver)), as
          M(gpufleet.node.node_health) returns them.
      type: dict
      sample: {"gpu_product": ["NVIDIA H100 80GB HBM3"], "gpu_count": 8, "driver": "535.161.08",
               "cuda": "12.2", "vbios": ["96.00.74.00.01"], "nic_firmware": ["28.39.3560"]}
    gpufleet_known_versions:
      description: O(known_versions), when it was given and not empty.
      type: dict
      sample: {"NVIDIA H100 80GB HBM3": {"driver": "535.161.08", "vbios": "96.00.74.00.01"}}
roles:
  description:
    - Per role given, its error (null when it was compared) and how many changes and checks it has
      (the settings themselves are in C(changes) and C(checks), once).
    - As provision stops a node at a role whose module fails, the roles after one with an error carry
      C(not_compared) (why) and no changes or checks; a failed check stops nothing (as in check mode).
  returned: always
  type: dict
  sample: {"gpu_power": {"changes": 1, "checks": 0, "error": null}}
"""

from concurrent.futures import ThreadPoolExecutor

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.node.plugins.module_utils.core.inputs import refuse_bad_input
from ansible_collections.gpufleet.node.plugins.module_utils.node import fleet_versions, node_versions
from ansible_collections.gpufleet.node.plugins.module_utils.node.drift import (
    ROLES,
    compare_roles,
    fabric_refusal,
    left_drained,
    validate_roles,
)


def main():
    # each role's options are checked by validate_roles against the role module's own ARGUMENT_SPEC, so
    # that a refused input is a configuration error (input_error), as in provision's preflight
    spec = {role: dict(type="dict") for role in ROLES}
    spec.update(
        drain_record=dict(type="path"),
        drain_scheduler=dict(type="dict"),
        fabric_stops=dict(type="bool", default=False),
        plan_failures_stop=dict(type="bool", default=True),
        report_changes=dict(type="bool", default=True),
        versions=dict(type="bool", default=False),
        known_versions=dict(type="dict"),
    )
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    known = module.params["known_versions"] if module.params["versions"] else None
    if known:
        refuse_bad_input(module, "compare the versions", fleet_versions.validate_known(known))
    desired = {role: module.params[role] for role in ROLES if module.params[role] is not None}
    if not desired:
        module.fail_json(msg="no role to compare: give the options of at least one of %s" % ", ".join(ROLES))
    desired = validate_roles(module, desired)
    # the versions' read (one nvidia-smi -q -x) runs beside the roles' reads, not after them
    with ThreadPoolExecutor(max_workers=1) as pool:
        smi_path = (desired.get("gpu_power") or {}).get("nvidia_smi_path")
        reading = pool.submit(node_versions.read, module, smi_path) if module.params["versions"] else None
        results = compare_roles(module, desired)
    versions, version_checks = reading.result() if reading else (None, [])
    # a judgement (report_changes false) reports only what stops the node: the checks of a role that
    # could not be planned; the roles' own tasks report the rest when they run
    judged = not module.params["report_changes"]
    changes = [] if judged else [c for r in results.values() for c in r["changes"]]
    refusal = fabric_refusal(results) if module.params["fabric_stops"] else None

    def stops(r):
        return bool(r["error"]) and (module.params["plan_failures_stop"] or bool(r.get("input_error")))

    checks = [
        c
        for role, r in results.items()
        if stops(r) or not judged or (refusal and role == "fabric")
        for c in r["checks"]
    ]
    drained = left_drained(
        module.params["drain_record"],
        module.run_command,
        module.params["drain_scheduler"],
        module.get_bin_path,
    )
    if drained:
        checks.append(drained)
    checks.extend(version_checks)
    # each setting once: the per-role view counts them (a 16-GPU node's result halves, ~15 kB, and the
    # controller handles every byte of it once per node)
    roles = {role: dict(r, changes=len(r["changes"]), checks=len(r["checks"])) for role, r in results.items()}
    output = dict(changed=False, changes=changes, checks=checks, roles=roles)
    if versions is not None:
        output["ansible_facts"] = {"gpufleet_versions": versions}
        if known:
            output["ansible_facts"]["gpufleet_known_versions"] = known
    errors = ["%s: %s" % (role, r["error"]) for role, r in results.items() if stops(r)]
    if refusal:
        errors.append(refusal)
    # a node whose versions could not be read fails as a role that cannot be planned does: drift --fix
    # leaves it out of its rollout, naming why, rather than draining a node it cannot read
    errors.extend(c["message"] for c in version_checks)
    if errors:
        # a role whose inputs this node cannot meet is a configuration error (gpufleet exits 2)
        input_error = any(r.get("input_error") for r in results.values())
        module.fail_json(msg="; ".join(errors), input_error=input_error, **output)
    module.exit_json(**output)


if __name__ == "__main__":
    main()
