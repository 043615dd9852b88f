# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Action plugin of gpufleet.node.node_facts: the roles' options from their defaults and the host's vars.

Each role's options are built from the same variables, by the same rules, as the role's configure
task builds its module's arguments (rdma_qos_manage leaves settings out, a null nvidia-smi path is
omitted); the role defaults sit under the host's variables, as Ansible's precedence has them. Then one
module run on the node compares them all.

The boot files of rdma_link, rdma_qos and gpu_power (:data:`BOOT_FILES`: what their configure tasks
template or copy, where, with which mode, and which unit they enable) depend on what the role's module
finds on the node (ports, GPU UUIDs, tool paths), so they cannot be rendered before the module runs.
The module returns, per role, what the templates use of the module's result (the role's registered
variable) and what the node has of each file; this plugin then renders each template as the template
module does (role defaults < host variables < role vars < the registered result, plus the template
module's own variables, ``ansible_managed`` among them) and compares (module_utils.boot_files.compare).
"""

from __future__ import annotations

import datetime
import os
import pwd
import time

from ansible import constants as C
from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.module_utils.common.text.converters import to_bytes
from ansible.plugins.action import ActionBase
from ansible.template import trust_as_template
from ansible_collections.gpufleet.node.plugins.module_utils import boot_files
from ansible_collections.gpufleet.node.plugins.module_utils.drift import host_status

ROLES = ("rdma_link", "rdma_qos", "gpu_power", "nccl_topology", "gpu_pinning")
_ROLES_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "roles")

# Per role: the variable its boot templates read the module's result from (registered in
# tasks/configure.yml), the input that turns its boot files off, and each file as its configure task
# writes it - (task action, src under templates/ or files/, dest, mode, unit it enables or None).
# tests/unit/plugins/test_node_facts_action.py holds this table to the roles' tasks.
BOOT_FILES = {
    "rdma_link": {
        "register": "__rdma_link_final",
        "when": None,
        "files": (
            ("template", "etc/gpufleet/rdma-link.sh.j2", "/etc/gpufleet/rdma-link.sh", "0644", None),
            (
                "template",
                "etc/systemd/system/gpufleet-rdma-link.service.j2",
                "/etc/systemd/system/gpufleet-rdma-link.service",
                "0644",
                "gpufleet-rdma-link.service",
            ),
        ),
    },
    "rdma_qos": {
        "register": "__rdma_qos_results",
        "when": None,
        "files": (
            ("template", "etc/gpufleet/rdma-qos.sh.j2", "/etc/gpufleet/rdma-qos.sh", "0644", None),
            (
                "template",
                "etc/systemd/system/gpufleet-rdma-qos.service.j2",
                "/etc/systemd/system/gpufleet-rdma-qos.service",
                "0644",
                "gpufleet-rdma-qos.service",
            ),
        ),
    },
    "gpu_power": {
        "register": "__gpu_power_result",
        "when": "gpu_power_boot_unit",
        "files": (
            ("template", "etc/gpufleet/gpu-power.conf.j2", "{{ __gpu_power_conf }}", "0644", None),
            ("copy", "usr/local/sbin/gpufleet-gpu-power", "{{ __gpu_power_script }}", "0755", None),
            (
                "template",
                "etc/systemd/system/gpufleet-gpu-power.service.j2",
                "/etc/systemd/system/{{ __gpu_power_unit }}",
                "0644",
                "{{ __gpu_power_unit }}",
            ),
        ),
    },
}


class _RenderFailed(Exception):
    """A boot template could not be rendered (the role's template task would fail the same way)."""


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


def template_vars(src, fullpath, dest, variables):
    """The variables the template module adds for one template (ansible_managed unless it is set).

    As ansible.builtin.template makes them: ``ansible_managed`` is the variable when set, else the
    (deprecated) ``[defaults] ansible_managed`` string, with {host}, {uid} and {file} and strftime's
    fields taken from the template file.
    """
    info = os.stat(fullpath)
    try:
        uid = pwd.getpwuid(info.st_uid).pw_name
    except KeyError:
        uid = info.st_uid
    added = {
        "template_host": os.uname()[1],
        "template_path": src,
        "template_mtime": datetime.datetime.fromtimestamp(info.st_mtime),
        "template_uid": uid,
        "template_run_date": datetime.datetime.now(),
        "template_destpath": dest,
        "template_fullpath": fullpath,
    }
    if "ansible_managed" not in variables:
        managed = C.config.get_config_value("DEFAULT_MANAGED_STR").format(
            host="{{ template_host }}", uid="{{ template_uid }}", file="{{ template_path }}"
        )
        added["ansible_managed"] = trust_as_template(time.strftime(managed, time.localtime(info.st_mtime)))
    return added


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = True

    def _load(self, role, kind):
        path = os.path.join(_ROLES_DIR, role, kind, "main.yml")
        if not os.path.exists(path):
            return {}
        return self._loader.load_from_file(path, trusted_as_template=True) or {}

    def _defaults(self, roles):
        defaults = {}
        for role in roles:
            defaults.update(self._load(role, "defaults"))
        return defaults

    def _boot_files(self, role, variables):
        """The role's boot files with their dest, mode and unit templated, or () when it writes none."""
        spec = BOOT_FILES.get(role)
        if spec is None:
            return ()
        templar = self._templar.copy_with_new_env(available_variables=variables)
        if spec["when"] and not templar.template(variables[spec["when"]]):
            return ()
        return tuple(
            {
                "action": action,
                "src": src,
                "path": templar.template(trust_as_template(dest)),
                "mode": mode,
                "unit": templar.template(trust_as_template(unit)) if unit else None,
            }
            for action, src, dest, mode, unit in spec["files"]
        )

    def _render(self, role, entry, variables):
        """The bytes the role's template (or copy) task writes to entry's path."""
        role_dir = os.path.join(_ROLES_DIR, role)
        if entry["action"] == "copy":
            with open(os.path.join(role_dir, "files", entry["src"]), "rb") as handle:
                return handle.read()
        source = os.path.join(role_dir, "templates", entry["src"])
        data = trust_as_template(self._loader.get_text_file_contents(source))
        available = dict(variables)
        available.update(template_vars(entry["src"], source, entry["path"], variables))
        templar = self._templar.copy_with_new_env(
            searchpath=[os.path.join(role_dir, "templates"), role_dir, os.path.dirname(source)],
            available_variables=available,
        )
        # The template module's defaults: trim_blocks on, lstrip_blocks off, "\n" line ends.
        text = templar.template(
            data,
            escape_backslashes=False,
            overrides=dict(trim_blocks=True, lstrip_blocks=False, newline_sequence="\n"),
        )
        return to_bytes(text or "", encoding="utf-8", errors="surrogate_or_strict")

    def _compare_boot(self, role, files, boot, variables):
        """The role's boot-file changes: its templates rendered with the module's result, against the node.

        variables: the role's (defaults < host variables < role vars); the module's result goes on top.
        """
        available = dict(variables)
        available[BOOT_FILES[role]["register"]] = boot["vars"]
        expected = []
        for entry in files:
            try:
                data = self._render(role, entry, available)
            except (AnsibleError, OSError) as exc:
                raise _RenderFailed(f"could not render {entry['src']} for {entry['path']}: {exc}") from exc
            expected.append(
                {
                    "path": entry["path"],
                    "sha256": boot_files.sha256_hex(data),
                    "mode": entry["mode"],
                    "unit": entry["unit"],
                }
            )
        return boot_files.compare(role, expected, boot["found"])

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
        if args.get("boot_files"):
            raise AnsibleActionFail("boot_files is filled from the roles' tasks; give {} to leave them out")
        files, role_variables = {}, {}
        if "boot_files" not in args:
            for role in roles:
                # Role vars (vars/main.yml) win over the host's, as in the role.
                role_variables[role] = dict(variables, **self._load(role, "vars"))
                files[role] = self._boot_files(role, role_variables[role])
        module_args["boot_files"] = {
            role: [{"path": f["path"], "unit": f["unit"]} for f in entries]
            for role, entries in files.items()
            if entries
        }
        result.update(
            self._execute_module(
                module_name="gpufleet.node.node_facts", module_args=module_args, task_vars=task_vars
            )
        )
        per_role = result.get("roles") or {}
        errors = []
        for role, outcome in per_role.items():
            boot = outcome.pop("boot", None)
            if boot is None or outcome.get("error"):
                continue
            try:
                boot_changes = self._compare_boot(role, files[role], boot, role_variables[role])
            except _RenderFailed as exc:
                outcome["error"] = str(exc)
                errors.append(f"{role}: {exc}")
                continue
            outcome["changes"] = outcome["changes"] + boot_changes
        if per_role:
            result["changes"] = [c for outcome in per_role.values() for c in outcome["changes"]]
            result["drift_status"] = host_status(per_role)
        if errors:
            result["failed"] = True
            result["msg"] = "; ".join([m for m in (result.get("msg"),) if m] + errors)
        return result
