"""fleet_report: a changed boot-file or boot-unit task of rdma_link/rdma_qos/gpu_power is recorded
with its change, named as drift names it; other tasks are recorded as before."""

from __future__ import annotations

import hashlib
from types import SimpleNamespace
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.callback import fleet_report

CONF = "/etc/gpufleet/gpu-power.conf"
OLD, NEW = "GPU-1 1100\n", "GPU-1 1400.0\n"


def sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16]


class Role:
    def __init__(self, name: str) -> None:
        self.name = name

    def get_name(self, include_role_fqcn: bool = True) -> str:
        return f"gpufleet.node.{self.name}" if include_role_fqcn else self.name


def task(role: str | None, action: str, **args: Any) -> Any:
    return SimpleNamespace(
        _role=Role(role) if role else None,
        action=action,
        resolved_action=action,
        args=args,
        ignore_errors=False,
        get_name=lambda: f"{role} : a task",
    )


EDITED = [{"before_header": CONF, "before": OLD, "after_header": "/tmp/x", "after": NEW}]


@pytest.mark.parametrize(
    ("the_task", "res", "changes"),
    [
        pytest.param(
            task("gpu_power", "ansible.builtin.template", src="etc/gpufleet/gpu-power.conf.j2", dest=CONF),
            {"changed": True, "diff": EDITED},
            [{"setting": f"gpu_power.boot_file[{CONF}]", "from": sha(OLD), "to": sha(NEW)}],
            id="template",
        ),
        pytest.param(
            task("gpu_power", "ansible.builtin.copy", src="usr/local/sbin/x", dest="/usr/local/sbin/x"),
            {
                "changed": True,
                "diff": {"before": {"path": "x", "mode": "0700"}, "after": {"path": "x", "mode": "0755"}},
            },
            [{"setting": "gpu_power.boot_file_mode[/usr/local/sbin/x]", "from": "0700", "to": "0755"}],
            id="copy-mode",
        ),
        pytest.param(
            task(
                "rdma_qos", "ansible.builtin.systemd_service", name="gpufleet-rdma-qos.service", enabled=True
            ),
            {"changed": True, "name": "gpufleet-rdma-qos.service", "enabled": True},
            [{"setting": "rdma_qos.boot_unit_enabled[gpufleet-rdma-qos.service]", "from": False, "to": True}],
            id="enable",
        ),
        pytest.param(
            task("gpu_power", "ansible.builtin.template", dest=CONF),
            {"changed": False, "diff": EDITED},
            [],
            id="ok",
        ),
        pytest.param(
            task("rdma_link", "ansible.builtin.systemd_service", daemon_reload=True),
            {"changed": True},
            [],
            id="daemon-reload",
        ),
        pytest.param(
            task("inference_service", "ansible.builtin.template", dest="/etc/systemd/system/vllm@.service"),
            {"changed": True, "diff": EDITED},
            [],
            id="not-a-boot-role",
        ),
        pytest.param(
            task(None, "ansible.builtin.template", dest=CONF),
            {"changed": True, "diff": EDITED},
            [],
            id="no-role",
        ),
    ],
)
def test_boot_changes(the_task: Any, res: dict[str, Any], changes: list[dict[str, Any]]) -> None:
    assert fleet_report.boot_changes(the_task, res) == changes


def test_recorded_with_the_tasks_own_changes_first() -> None:
    callback = fleet_report.CallbackModule()
    host = SimpleNamespace(get_name=lambda: "node01")
    written = task("gpu_power", "ansible.builtin.template", dest=CONF)
    callback._record(
        SimpleNamespace(_host=host, _task=written, _result={"changed": True, "diff": EDITED}), "ok"
    )
    module = task("gpu_power", "gpufleet.node.gpu_power")
    own = {"setting": "gpu_power.enforced_limit_w[GPU-1]", "from": 1100.0, "to": 1400.0}
    callback._record(
        SimpleNamespace(_host=host, _task=module, _result={"changed": True, "changes": [own]}), "ok"
    )
    recorded = callback._hosts["node01"]["tasks"]
    assert recorded[0]["changes"] == [
        {"setting": f"gpu_power.boot_file[{CONF}]", "from": sha(OLD), "to": sha(NEW)}
    ]
    assert recorded[1]["changes"] == [own]
    assert callback._hosts["node01"]["changed"] == 2
