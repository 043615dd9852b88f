#!/usr/bin/python
# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: node_facts
short_description: Compare every gpufleet role's desired state with the node in one call (drift)
version_added: "0.2.0"
description:
  - Reads the node's GPUs, RDMA ports, QoS, power limits, persistence, NCCL topology file and instance
    environment files once, and compares them with what the roles C(rdma_link), C(rdma_qos), C(gpu_power),
    C(nccl_topology) and C(gpu_pinning) would make them. Each comparison is the one the role's own module
    makes in check mode, so RV(changes) holds the same C({setting, from, to}) entries, under the same
    setting names, that C(gpufleet provision --check) reports.
  - Writes nothing. It exists so that a fleet-wide drift check costs one module run per node, not one task
    per role and setting.
  - Its action plugin fills each role's options from the role's defaults and the host's variables
    (C(rdma_link_mtu), C(gpu_power_limit_w), ...), as the roles read them, unless the task gives them.
  - A role whose comparison cannot be made (no GPUs, a GPU missing for an instance, an interface that is
    not there) is reported in RV(roles) with its error and the module fails after comparing the others.
    A link that is down is a failed check in RV(checks), not a change.
  - The boot files of C(rdma_link), C(rdma_qos) and C(gpu_power) (the scripts, confs and systemd units that
    re-apply their settings at every boot) are compared too - content, mode, and whether the unit is
    enabled - because one edited by hand re-applies the wrong setting at the next boot. Their content
    depends on the node (ports, GPU UUIDs, tool paths), so the module returns what the role's templates use
    and what the node has, and the action plugin renders the templates on the controller as the role's
    template tasks do and compares, in the same module run. They are reported as
    C(<role>.boot_file[<path>]) (from C(sha256:<16 hex>) of the node's file, or null when there is none,
    to that of the rendered file), C(<role>.boot_file_mode[<path>]) (only when the content is right) and
    C(<role>.boot_unit_enabled[<unit>]) (only when the unit file is right, as the role's check mode).
options:
  roles:
    description:
      - The roles to compare; the action plugin fills the options of each from the host's variables.
    type: list
    elements: str
    choices: [rdma_link, rdma_qos, gpu_power, nccl_topology, gpu_pinning]
    default: [rdma_link, rdma_qos, gpu_power, nccl_topology, gpu_pinning]
  rdma_link:
    description:
      - The options of M(gpufleet.node.rdma_link) (ports, link_type, roce_mode, tos, mtu, min_speed_gbps).
    type: dict
  rdma_qos:
    description:
      - The options of M(gpufleet.node.rdma_qos) without C(interface), plus C(interfaces) (empty means every
        mlx5 Ethernet port). An option that is null is not compared.
    type: dict
  gpu_power:
    description:
      - The options of M(gpufleet.node.gpu_power) (limit_w, limits, persistence,
        persistenced_unit, nvidia_smi_path).
    type: dict
  nccl_topology:
    description: The options of M(gpufleet.node.nccl_topology) (path, gdr, nvidia_smi_path).
    type: dict
  gpu_pinning:
    description:
      - The options of M(gpufleet.node.gpu_pinning) (instances, gpu_count, env_dir,
        nccl_topo_file, nvidia_smi_path).
    type: dict
  boot_files:
    description:
      - Per role, the boot files to read, each C({path, unit}) (C(unit) the name the role enables, or null).
      - The action plugin fills it from the roles (as their tasks write them) and compares what comes back;
        set O(boot_files={}) to leave the boot files out.
    type: dict
    default: {}
extends_documentation_fragment:
  - action_common_attributes
  - action_common_attributes.flow
attributes:
  action:
    support: full
    details: The action plugin reads the roles' defaults and the host's variables on the controller.
  async:
    support: none
  check_mode:
    support: full
    details: Never writes, in or out of check mode.
  diff_mode:
    support: none
  platform:
    platforms: posix
notes:
  - Runs the same commands as the role modules, each once (C(nvidia-smi -q -x), C(nvidia-smi topo -m),
    C(mlxconfig -d <pci> q), C(mlnx_qos -i <if>), C(ethtool -a <if>),
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
  - gpufleet developers
"""

EXAMPLES = r"""
- name: Compare every role with the node (options from the host's variables)
  gpufleet.node.node_facts:
  register: drift

- name: Only the fabric
  gpufleet.node.node_facts:
    roles: [rdma_link, rdma_qos]
"""

RETURN = r"""
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
  description: Verifications that configuration cannot fix (RDMA link state and speed).
  returned: always
  type: list
  elements: dict
  sample: [{"name": "rdma_link.link_state[mlx5_3]", "ok": false, "value": "DOWN", "limit": "ACTIVE",
            "unit": "", "message": "mlx5_3 (ens39np0) link is DOWN ..."}]
roles:
  description: Per role compared, its changes, checks and error (null when it was compared).
  returned: always
  type: dict
  sample: {"gpu_power": {"changes": [], "checks": [], "error": null}}
drift_status:
  description: V(drifted), V(ok) or V(failed) (a role could not be compared or a check failed).
  returned: always
  type: str
  sample: drifted
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.node.plugins.module_utils.drift import ROLES, compare_roles, host_status


def main():
    module = AnsibleModule(
        argument_spec=dict(
            roles=dict(type="list", elements="str", choices=list(ROLES), default=list(ROLES)),
            rdma_link=dict(type="dict"),
            rdma_qos=dict(type="dict"),
            gpu_power=dict(type="dict"),
            nccl_topology=dict(type="dict"),
            gpu_pinning=dict(type="dict"),
            boot_files=dict(type="dict", default={}),
        ),
        supports_check_mode=True,
    )
    desired = {role: module.params[role] for role in module.params["roles"]}
    missing = [role for role, options in desired.items() if options is None]
    if missing:
        module.fail_json(
            msg="no options for %s: run node_facts through its action plugin (gpufleet.node.node_facts), "
            "which fills them from the host's variables, or give them" % ", ".join(missing)
        )
    results = compare_roles(module, desired, module.params["boot_files"])
    changes = [c for r in results.values() for c in r["changes"]]
    checks = [c for r in results.values() for c in r["checks"]]
    status = host_status(results)
    output = dict(changed=False, changes=changes, checks=checks, roles=results, drift_status=status)
    errors = ["%s: %s" % (role, r["error"]) for role, r in results.items() if r["error"]]
    if errors:
        module.fail_json(msg="; ".join(errors), **output)
    module.exit_json(**output)


if __name__ == "__main__":
    main()
