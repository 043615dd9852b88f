"""fleet_report: each task's own changes, checks, hints and diff are recorded per host, as the task
returned them. Boot files are changes of their role's module (it writes them), so a template or
copy task adds no change of its own."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ansible_collections.gpufleet.node.plugins.callback import fleet_report
from ansible_collections.gpufleet.node.plugins.module_utils import results

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


def test_a_loop_that_failed_or_lost_its_host_names_its_items_not_ansibles_summary() -> None:
    callback = fleet_report.CallbackModule()
    callback.v2_playbook_on_play_start(SimpleNamespace(get_name=lambda: "Post-maintenance gate"))
    host = SimpleNamespace(get_name=lambda: "node02")
    cliff = {
        "msg": "One or more items failed",
        "results": [
            {"item": {"name": "glm52"}, "_ansible_item_label": "glm52", "failed": False, "msg": "ok"},
            {
                "item": {"name": "kimik3"},
                "_ansible_item_label": "kimik3",
                "exception": "(traceback unavailable)",  # ansible-core 2.21: no "failed" key
                "msg": "hit rate 0.07",
            },
        ],
    }
    lost = {
        "msg": "All items completed",
        "unreachable": True,
        "results": [{"item": "a", "unreachable": True, "msg": "Failed to connect to the host via ssh"}],
    }
    looped = task("thermal_gate", "gpufleet.node.service_check")
    callback._record(SimpleNamespace(_host=host, _task=looped, _result=cliff), "failed")
    callback._record(SimpleNamespace(_host=host, _task=looped, _result=lost), "unreachable")
    recorded = callback._hosts["node02"]["tasks"]
    assert recorded[0]["msg"] == "kimik3: hit rate 0.07"
    assert recorded[1]["msg"] == "a: Failed to connect to the host via ssh"
    assert {t["play"] for t in recorded} == {"Post-maintenance gate"}


def test_ansibles_internal_type_names_are_made_plain() -> None:
    message = (
        "argument 'limit_w' is of type <class 'ansible._internal._datatag._tags._AnsibleTaggedStr'> "
        "and we were unable to convert to float"
    )
    assert results.plain_types(message) == (
        "argument 'limit_w' is of type str and we were unable to convert to float"
    )
    real = (
        "Validation of arguments failed:\nargument 'gpu_power_limit_w' is of type str and we were unable to "
        "convert to float: <class 'ansible.module_utils._internal._datatag._AnsibleTaggedStr'> cannot be "
        "converted to a float"
    )
    assert results.plain_types(real).endswith("convert to float: str cannot be converted to a float")
