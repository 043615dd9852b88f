"""fleet_report: each task's own changes, checks, hints and diff are recorded per host, as the task
returned them. Boot files are changes of their role's module (it writes them), so a template or
copy task adds no change of its own."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ansible_collections.gpufleet.node.plugins.callback import fleet_report

CONF = "/etc/gpufleet/gpu-power.conf"


def task(role: str | None, action: str, **args: Any) -> Any:
    return SimpleNamespace(
        action=action,
        resolved_action=action,
        args=args,
        ignore_errors=False,
        get_name=lambda: f"{role} : a task",
    )


def test_recorded_as_the_module_returned_them() -> None:
    callback = fleet_report.CallbackModule()
    host = SimpleNamespace(get_name=lambda: "node01")
    boot = {
        "setting": f"gpu_power.boot_file[{CONF}]",
        "from": "sha256:0123456789abcdef",
        "to": "sha256:fedcba9876543210",
    }
    own = {"setting": "gpu_power.enforced_limit_w[GPU-1]", "from": 1100.0, "to": 1400.0}
    diff = [{"before": "a\n", "after": "b\n"}, {"before_header": CONF, "before": "x\n", "after": "y\n"}]
    module = task("gpu_power", "gpufleet.node.gpu_power")
    callback._record(
        SimpleNamespace(
            _host=host, _task=module, _result={"changed": True, "changes": [own, boot], "diff": diff}
        ),
        "ok",
    )
    # a template task that changed (another role's file) records its diff, but no change of its own
    other = task("inference_service", "ansible.builtin.template", dest="/etc/systemd/system/vllm@.service")
    callback._record(
        SimpleNamespace(_host=host, _task=other, _result={"changed": True, "diff": diff[1]}), "ok"
    )
    recorded = callback._hosts["node01"]["tasks"]
    assert recorded[0]["changes"] == [own, boot]
    assert recorded[0]["diff"] == [diff]
    assert "changes" not in recorded[1] and recorded[1]["diff"] == [diff[1]]
    assert callback._hosts["node01"]["changed"] == 2


def test_loop_results_are_flattened() -> None:
    callback = fleet_report.CallbackModule()
    host = SimpleNamespace(get_name=lambda: "node01")
    one = {"setting": "a", "from": 1, "to": 2}
    two = {"setting": "b", "from": 1, "to": 2}
    callback._record(
        SimpleNamespace(
            _host=host,
            _task=task("x", "gpufleet.node.x"),
            _result={
                "changed": True,
                "results": [{"changes": [one]}, {"changes": [two], "reboot_required": True}],
            },
        ),
        "ok",
    )
    entry = callback._hosts["node01"]["tasks"][0]
    assert entry["changes"] == [one, two] and entry["reboot_required"] is True
