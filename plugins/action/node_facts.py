# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Action plugin of gpufleet.node.node_facts: the roles' options from their defaults and the host's vars.

Each role's options are built from the same variables, by the same rules, as the role's configure
task builds its module's arguments (rdma_qos_manage leaves settings out, a null nvidia-smi path is
omitted); the role defaults sit under the host's variables, as Ansible's precedence has them. Then one
module run on the node compares them all.
"""

from __future__ import annotations

import os

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

ROLES = ("rdma_link", "rdma_qos", "gpu_power", "nccl_topology", "gpu_pinning")
_ROLES_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "roles")


def role_options(role, value):
    """The module options of one role from a lookup of its (templated) variables."""
    if role == "rdma_link":
        return {
            "ports": value("rdma_link_ports"),
            "link_type": value("rdma_link_type"),
            "roce_mode": value("rdma_link_roce_mode"),
            "tos": int(value("rdma_link_tos")),
            "mtu": int(value("rdma_link_mtu")),
            "min_speed_gbps": int(value("rdma_link_min_speed_gbps")),
        }
    if role == "rdma_qos":
        manage = value("rdma_qos_manage")
        options = {"interfaces": value("rdma_qos_interfaces")}
        for option, setting, var in (
            ("trust", "trust", "rdma_qos_trust"),
            ("pfc_priorities", "pfc", "rdma_qos_pfc_priorities"),
            ("ecn_priorities", "ecn", "rdma_qos_ecn_priorities"),
            ("cnp_dscp", "cnp_dscp", "rdma_qos_cnp_dscp"),
            ("global_pause", "global_pause", "rdma_qos_global_pause"),
        ):
            options[option] = value(var) if setting in manage else None
        return options
    if role == "gpu_power":
        limit = value("gpu_power_limit_w")
        return {
            "limit_w": None if limit is None else float(limit),
            "limits": dict(value("gpu_power_limits") or {}),
            "persistence": bool(value("gpu_power_persistence")),
            "persistenced_unit": value("gpu_power_persistenced_unit"),
            "nvidia_smi_path": value("gpu_power_nvidia_smi_path") or None,
        }
    if role == "nccl_topology":
        return {
            "path": value("nccl_topology_path"),
            "gdr": bool(value("nccl_topology_gdr")),
            "nvidia_smi_path": value("nccl_topology_nvidia_smi_path") or None,
        }
    return {
        "instances": list(value("gpu_pinning_instances") or []),
        "gpu_count": int(value("gpu_pinning_gpu_count")),
        "env_dir": value("gpu_pinning_env_dir"),
        "nccl_topo_file": value("gpu_pinning_nccl_topo_file"),
        "nvidia_smi_path": value("gpu_pinning_nvidia_smi_path") or None,
    }


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = True

    def _defaults(self, roles):
        defaults = {}
        for role in roles:
            path = os.path.join(_ROLES_DIR, role, "defaults", "main.yml")
            loaded = self._loader.load_from_file(path, trusted_as_template=True) or {}
            defaults.update(loaded)
        return defaults

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args = dict(self._task.args)
        roles = list(args.get("roles") or ROLES)
        unknown = [r for r in roles if r not in ROLES]
        if unknown:
            raise AnsibleActionFail(f"roles: {', '.join(unknown)} is not one of {', '.join(ROLES)}")
        variables = dict(self._defaults(roles))
        variables.update(task_vars)
        templar = self._templar.copy_with_new_env(available_variables=variables)

        def value(name):
            return templar.template(variables[name])

        module_args = {"roles": roles}
        for role in roles:
            module_args[role] = args.get(role) or role_options(role, value)
        result.update(
            self._execute_module(
                module_name="gpufleet.node.node_facts", module_args=module_args, task_vars=task_vars
            )
        )
        return result
