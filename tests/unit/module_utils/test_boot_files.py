"""module_utils.boot_files: the roles' boot files as changes, from the node (drift) and from a
template/copy task's diff (provision's report), under the same names."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils import boot_files

CONF = "/etc/gpufleet/gpu-power.conf"
UNIT_FILE = "/etc/systemd/system/gpufleet-gpu-power.service"
UNIT = "gpufleet-gpu-power.service"
GOOD = "a" * 64
EDITED = "b" * 64


def expected() -> list[dict[str, Any]]:
    return [
        {"path": CONF, "sha256": GOOD, "mode": "0644", "unit": None},
        {"path": UNIT_FILE, "sha256": GOOD, "mode": "0644", "unit": UNIT},
    ]


def node(conf: Any = "same", unit_file: Any = "same", enabled: bool | None = True) -> dict[str, Any]:
    def state(value: Any) -> Any:
        if value == "same":
            return {"sha256": GOOD, "mode": "0644"}
        return value

    units = {} if enabled is None else {UNIT: enabled}
    return {"files": {CONF: state(conf), UNIT_FILE: state(unit_file)}, "units": units}


def change(setting: str, frm: Any, to: Any) -> dict[str, Any]:
    return {"setting": setting, "from": frm, "to": to}


FILE = f"gpu_power.boot_file[{CONF}]"
UNIT_CONTENT = f"gpu_power.boot_file[{UNIT_FILE}]"


@pytest.mark.parametrize(
    ("found", "changes"),
    [
        pytest.param(node(), [], id="as-written"),
        pytest.param(node(conf=None), [change(FILE, None, "sha256:" + "a" * 16)], id="missing"),
        pytest.param(
            node(conf={"sha256": EDITED, "mode": "0644"}),
            [change(FILE, "sha256:" + "b" * 16, "sha256:" + "a" * 16)],
            id="edited",
        ),
        pytest.param(
            node(conf={"sha256": GOOD, "mode": "0600"}),
            [change(f"gpu_power.boot_file_mode[{CONF}]", "0600", "0644")],
            id="mode",
        ),
        pytest.param(
            # rewritten with its mode: one change, as the template task makes one
            node(conf={"sha256": EDITED, "mode": "0600"}),
            [change(FILE, "sha256:" + "b" * 16, "sha256:" + "a" * 16)],
            id="edited-and-mode",
        ),
        pytest.param(
            node(enabled=False),
            [change(f"gpu_power.boot_unit_enabled[{UNIT}]", False, True)],
            id="unit-disabled",
        ),
        pytest.param(
            # the role's check mode leaves enabling to the run that writes the unit: so does drift
            node(unit_file={"sha256": EDITED, "mode": "0644"}, enabled=False),
            [change(UNIT_CONTENT, "sha256:" + "b" * 16, "sha256:" + "a" * 16)],
            id="unit-edited-and-disabled",
        ),
        pytest.param(
            node(unit_file=None, enabled=None),
            [change(UNIT_CONTENT, None, "sha256:" + "a" * 16)],
            id="unit-missing",
        ),
        pytest.param(
            node(unit_file={"sha256": GOOD, "mode": "0755"}, enabled=False),
            [change(f"gpu_power.boot_file_mode[{UNIT_FILE}]", "0755", "0644")],
            id="unit-mode-and-disabled",
        ),
        pytest.param(
            node(conf=None, unit_file={"sha256": GOOD, "mode": "0600"}),
            [
                change(FILE, None, "sha256:" + "a" * 16),
                change(f"gpu_power.boot_file_mode[{UNIT_FILE}]", "0600", "0644"),
            ],
            id="in-order",
        ),
    ],
)
def test_compare(found: dict[str, Any], changes: list[dict[str, Any]]) -> None:
    assert boot_files.compare("gpu_power", expected(), found) == changes


@pytest.mark.parametrize(
    ("mode", "text"),
    [("0644", "0644"), ("644", "0644"), (0o100755, "0755"), ("04755", "04755"), (0o600, "0600")],
)
def test_mode_text_is_the_file_modules(mode: Any, text: str) -> None:
    assert boot_files.mode_text(mode) == text


@pytest.mark.parametrize(
    ("rc", "out", "enabled"),
    [
        (0, "enabled\n", True),
        (0, "static\n", True),
        (1, "disabled\n", False),
        (1, "", False),  # no unit file: systemctl says so on stderr
        (1, "masked\n", False),
        # exit 0, yet ansible.builtin.systemd_service enables them
        (0, "enabled-runtime\n", False),
        (0, "indirect\n", False),
        (0, "alias\n", False),
    ],
)
def test_unit_enabled_reads_is_enabled_as_the_role_does(rc: int, out: str, enabled: bool) -> None:
    assert boot_files.unit_enabled(rc, out) is enabled


def test_file_state(tmp_path: Path) -> None:
    path = tmp_path / "gpu-power.conf"
    assert boot_files.file_state(str(path)) is None
    path.write_bytes(b"GPU-1 1400.0\n")
    os.chmod(path, 0o600)
    assert boot_files.file_state(str(path)) == {
        "sha256": hashlib.sha256(b"GPU-1 1400.0\n").hexdigest(),
        "mode": "0600",
    }
    with pytest.raises(OSError, match="not a regular file"):
        boot_files.file_state(str(tmp_path))


def sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16]


OLD = "#\n# Ansible managed\n#\nGPU-1 1100\n"
NEW = "#\n# Ansible managed\n#\nGPU-1 1400.0\n"
TMP = "/root/.ansible/tmp/ansible-local-1/tmpx/gpu-power.conf.j2"


# The diffs ansible.builtin.template/copy return (ansible-core 2.21), as fleet_report records them.
@pytest.mark.parametrize(
    ("diff", "changes"),
    [
        pytest.param(
            [{"before_header": CONF, "before": OLD, "after_header": TMP, "after": NEW}],
            [change(FILE, sha(OLD), sha(NEW))],
            id="edited",
        ),
        pytest.param(
            [{"before": "", "after_header": TMP, "after": NEW}],
            [change(FILE, None, sha(NEW))],
            id="missing",
        ),
        pytest.param(
            [{"before_header": CONF, "before": "", "after_header": TMP, "after": NEW}],
            [change(FILE, sha(""), sha(NEW))],
            id="empty",
        ),
        pytest.param(
            [{"dst_binary": 1, "after_header": TMP, "after": NEW}],
            [change(FILE, "unknown", sha(NEW))],
            id="binary",
        ),
        pytest.param(
            {"before": {"path": CONF, "mode": "0600"}, "after": {"path": CONF, "mode": "0644"}},
            [change(f"gpu_power.boot_file_mode[{CONF}]", "0600", "0644")],
            id="mode",
        ),
        pytest.param({"before": {"path": CONF}, "after": {"path": CONF}}, [], id="unchanged"),
        pytest.param(
            {"before": {"path": CONF, "owner": 1000}, "after": {"path": CONF, "owner": 0}}, [], id="owner"
        ),
        pytest.param(None, [], id="no-diff"),
    ],
)
def test_file_result_changes(diff: Any, changes: list[dict[str, Any]]) -> None:
    assert boot_files.file_result_changes("gpu_power", CONF, diff) == changes


def test_a_task_diff_and_the_node_name_the_same_change() -> None:
    """provision's report (from the task's diff) and drift (from the node) agree to the letter."""
    node_side = boot_files.compare(
        "gpu_power",
        [{"path": CONF, "sha256": hashlib.sha256(NEW.encode()).hexdigest(), "mode": "0644", "unit": None}],
        {"files": {CONF: {"sha256": hashlib.sha256(OLD.encode()).hexdigest(), "mode": "0644"}}},
    )
    task_side = boot_files.file_result_changes(
        "gpu_power", CONF, [{"before_header": CONF, "before": OLD, "after_header": TMP, "after": NEW}]
    )
    assert node_side == task_side


class Node:
    """AnsibleModule as node_facts' comparison uses it: systemctl is-enabled answers from a table."""

    def __init__(self, enabled: dict[str, bool]) -> None:
        self.enabled = enabled
        self.calls: list[list[str]] = []

    def get_bin_path(self, name: str, required: bool = False, opt_dirs: Any = None) -> str:
        return f"/usr/bin/{name}"

    def run_command(self, args: list[str], **kwargs: Any) -> tuple[int, str, str]:
        self.calls.append(list(args))
        assert args[:2] == ["/usr/bin/systemctl", "is-enabled"] and kwargs["environ_update"] == {
            "LC_ALL": "C"
        }
        on = self.enabled[args[2]]
        return (0 if on else 1), ("enabled\n" if on else "disabled\n"), ""


def test_compare_roles_reads_the_boot_files_of_the_roles_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ansible_collections.gpufleet.node.plugins.module_utils import drift

    script = tmp_path / "rdma-link.sh"
    script.write_bytes(b"rc=0\n")
    unit = tmp_path / "gpufleet-rdma-link.service"
    unit.write_bytes(b"[Unit]\n")
    for path in (script, unit):
        path.chmod(0o644)
    boot_vars = {"boot_commands": ["echo 4200 > /sys/class/net/ens21np0/mtu"]}

    def compare(role: str) -> Any:
        def run(view: Any, params: dict[str, Any]) -> tuple[list[Any], list[Any], Any]:
            if role == "gpu_power":
                raise drift.RoleFailed("nvidia-smi lists no GPU")
            return [], [], boot_vars if role == "rdma_link" else None

        return run

    monkeypatch.setattr(drift, "_COMPARE", {role: compare(role) for role in drift.ROLES})
    module = Node({"gpufleet-rdma-link.service": False, "gone.service": True})
    files = {
        "rdma_link": [
            {"path": str(script), "unit": None},
            {"path": str(unit), "unit": "gpufleet-rdma-link.service"},
            {"path": str(tmp_path / "gone.service"), "unit": "gone.service"},
        ],
        "gpu_power": [{"path": str(script), "unit": None}],
    }
    desired = {"rdma_link": {}, "nccl_topology": {}, "gpu_power": {}}
    results = drift.compare_roles(module, desired, files)
    assert results["rdma_link"]["boot"] == {
        "vars": boot_vars,
        "found": {
            "files": {
                str(script): {"sha256": hashlib.sha256(b"rc=0\n").hexdigest(), "mode": "0644"},
                str(unit): {"sha256": hashlib.sha256(b"[Unit]\n").hexdigest(), "mode": "0644"},
                str(tmp_path / "gone.service"): None,
            },
            # a unit whose file is missing is not looked up (its file is the change)
            "units": {"gpufleet-rdma-link.service": False},
        },
    }
    assert module.calls == [["/usr/bin/systemctl", "is-enabled", "gpufleet-rdma-link.service"]]
    assert "boot" not in results["nccl_topology"]  # no boot files asked for
    assert results["gpu_power"] == {"changes": [], "checks": [], "error": "nvidia-smi lists no GPU"}
