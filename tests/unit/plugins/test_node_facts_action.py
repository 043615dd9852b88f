"""node_facts' action plugin: its table of boot files is what the roles write, and it renders them
as ansible.builtin.template does (the byte-for-byte check against a provisioned node is
tests/integration/test_drift.py: a freshly provisioned fleet drifts by nothing)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play_context import PlayContext
from ansible.playbook.task import Task
from ansible.template import Templar
from ansible_collections.gpufleet.node.plugins.action import node_facts
from ansible_collections.gpufleet.node.plugins.module_utils import boot_files

ROLES = Path(__file__).resolve().parents[3] / "roles"


def tasks(items: list[dict[str, Any]], when: Any = None) -> list[tuple[dict[str, Any], Any]]:
    """Every task of a task list with the `when` of its enclosing block, blocks flattened."""
    found = []
    for item in items:
        if "block" in item:
            found += tasks(item["block"], item.get("when", when))
        else:
            found.append((item, when))
    return found


def configure(role: str) -> list[tuple[dict[str, Any], Any]]:
    return tasks(yaml.safe_load((ROLES / role / "tasks" / "configure.yml").read_text()))


@pytest.mark.parametrize("role", boot_files.BOOT_ROLES)
def test_the_table_is_what_the_roles_configure_tasks_write(role: str) -> None:
    written, enabled, whens = [], set(), set()
    for task, when in configure(role):
        for action in ("template", "copy"):
            args = task.get(f"ansible.builtin.{action}")
            if args:
                written.append((action, args["src"], args["dest"], args["mode"]))
                whens.add(when)
                # provision's report names the change from the task's diff: it must always have one
                assert task.get("diff") is True, task["name"]
        unit = task.get("ansible.builtin.systemd_service") or {}
        if unit.get("enabled") is True:
            enabled.add(unit["name"])
    spec = node_facts.BOOT_FILES[role]
    assert [entry[:4] for entry in spec["files"]] == written
    assert {entry[4] for entry in spec["files"] if entry[4]} == enabled
    assert whens == {spec["when"]}


@pytest.mark.parametrize("role", boot_files.BOOT_ROLES)
def test_the_registered_variable_is_the_one_the_templates_read(role: str) -> None:
    register = node_facts.BOOT_FILES[role]["register"]
    sets = [
        t
        for t, _ in configure(role)
        if t.get("register") == register or register in t.get("ansible.builtin.set_fact", {})
    ]
    assert sets, f"{role} does not register {register}"
    templates = "".join(p.read_text() for p in (ROLES / role / "templates").rglob("*.j2"))
    assert register in templates
    assert set(node_facts.BOOT_FILES) == set(boot_files.BOOT_ROLES)


@pytest.fixture
def action() -> node_facts.ActionModule:
    loader = DataLoader()
    return node_facts.ActionModule(
        task=Task(),
        connection=None,
        play_context=PlayContext(),
        loader=loader,
        templar=Templar(loader=loader),
        shared_loader_obj=None,
    )


def role_vars(action: node_facts.ActionModule, role: str, **host: Any) -> dict[str, Any]:
    variables = dict(action._defaults([role]))
    variables.update(host)
    variables.update(action._load(role, "vars"))
    return variables


RESULT = {
    "limits": {"GPU-b": 1400.0, "GPU-a": 1300.0},
    "persistence_method": "nvidia-persistenced",
    "nvidia_smi": "/usr/bin/nvidia-smi",
}
CONF = (
    "#\n# Ansible managed\n#\n"
    '# GPU power limits by UUID, one "<GPU UUID> <watts>" per line. /usr/local/sbin/gpufleet-gpu-power\n'
    "# applies them at every boot (gpufleet-gpu-power.service) and fails if a GPU does not enforce"
    " its limit.\n"
    "GPU-a 1300.0\nGPU-b 1400.0\n"
)


def test_gpu_power_files_render_as_the_template_module_writes_them(action: node_facts.ActionModule) -> None:
    variables = role_vars(action, "gpu_power")
    files = action._boot_files("gpu_power", variables)
    assert [(f["path"], f["mode"], f["unit"]) for f in files] == [
        ("/etc/gpufleet/gpu-power.conf", "0644", None),
        ("/usr/local/sbin/gpufleet-gpu-power", "0755", None),
        ("/etc/systemd/system/gpufleet-gpu-power.service", "0644", "gpufleet-gpu-power.service"),
    ]
    variables["__gpu_power_result"] = RESULT
    assert action._render("gpu_power", files[0], variables).decode() == CONF
    script = ROLES / "gpu_power" / "files" / "usr" / "local" / "sbin" / "gpufleet-gpu-power"
    assert action._render("gpu_power", files[1], variables) == script.read_bytes()
    unit = action._render("gpu_power", files[2], variables).decode()
    assert unit.startswith("#\n# Ansible managed\n#\n[Unit]\n")
    assert "ExecStartPre" not in unit and "Before=" not in unit
    assert "ExecStart=/usr/local/sbin/gpufleet-gpu-power /etc/gpufleet/gpu-power.conf\n" in unit


def test_host_vars_and_ansible_managed_are_the_hosts(action: node_facts.ActionModule) -> None:
    variables = role_vars(
        action,
        "gpu_power",
        ansible_managed="Managed by gpufleet",
        gpu_power_boot_before=["vllm@glm52.service"],
    )
    files = action._boot_files("gpu_power", variables)
    variables["__gpu_power_result"] = RESULT
    assert (
        action._render("gpu_power", files[0], variables)
        .decode()
        .startswith("#\n# Managed by gpufleet\n#\n# GPU")
    )
    assert "\nBefore=vllm@glm52.service\n" in action._render("gpu_power", files[2], variables).decode()


def test_no_boot_unit_no_boot_files(action: node_facts.ActionModule) -> None:
    assert action._boot_files("gpu_power", role_vars(action, "gpu_power", gpu_power_boot_unit=False)) == ()
    assert action._boot_files("nccl_topology", role_vars(action, "nccl_topology")) == ()


def test_rdma_qos_script_lists_each_interface(action: node_facts.ActionModule) -> None:
    variables = role_vars(action, "rdma_qos")
    script = action._boot_files("rdma_qos", variables)[0]
    variables["__rdma_qos_results"] = {
        "results": [
            {"interface": "ens21np0", "ibdev": "mlx5_0", "boot_commands": ["a ens21np0", "b ens21np0"]},
            {"interface": "ens38np0", "ibdev": "mlx5_1", "boot_commands": ["a ens38np0"]},
        ]
    }
    text = action._render("rdma_qos", script, variables).decode()
    assert text.startswith("#\n# Ansible managed\n#\n# Re-applies")
    assert text.endswith(
        "rc=0\n# ens21np0 (mlx5_0)\na ens21np0 || rc=1\nb ens21np0 || rc=1\n"
        '# ens38np0 (mlx5_1)\na ens38np0 || rc=1\nexit "$rc"\n'
    )


def test_compare_boot_names_an_edited_conf(action: node_facts.ActionModule) -> None:
    variables = role_vars(action, "gpu_power")
    files = action._boot_files("gpu_power", variables)
    good = boot_files.sha256_hex(CONF.encode())
    found = {
        "files": {
            "/etc/gpufleet/gpu-power.conf": {"sha256": "0" * 64, "mode": "0644"},
            "/usr/local/sbin/gpufleet-gpu-power": None,
            "/etc/systemd/system/gpufleet-gpu-power.service": None,
        },
        "units": {},
    }
    changes = action._compare_boot("gpu_power", files, {"vars": RESULT, "found": found}, variables)
    assert changes[0] == {
        "setting": "gpu_power.boot_file[/etc/gpufleet/gpu-power.conf]",
        "from": "sha256:0000000000000000",
        "to": boot_files.digest(good),
    }
    assert [c["setting"] for c in changes[1:]] == [
        "gpu_power.boot_file[/usr/local/sbin/gpufleet-gpu-power]",
        "gpu_power.boot_file[/etc/systemd/system/gpufleet-gpu-power.service]",
    ]
