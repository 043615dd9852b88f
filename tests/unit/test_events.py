"""events: each host's results as ansible-runner's events tell them (the report's one source). A task's
own changes, checks, hints and diff are kept as the module returned them, a loop's items flattened."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import ansible_runner
from ansible_collections.gpufleet.node.plugins.module_utils.core import results

from gpufleet import events, runner

CONF = "/etc/gpufleet/gpu-power.conf"


def _event(kind: str, res: dict[str, Any] | None = None, host: str = "node01", **data: Any) -> dict[str, Any]:
    event_data: dict[str, Any] = {"host": host, "task": "a task", "play": "Provision", **data}
    if res is not None:
        event_data["res"] = res
    return {"event": kind, "event_data": event_data}


def test_recorded_as_the_module_returned_them() -> None:
    collector = events.Collector()
    boot = {"setting": f"gpu_power.boot_file[{CONF}]", "from": "sha256:01", "to": "sha256:fe"}
    own = {"setting": "gpu_power.enforced_limit_w[GPU-1]", "from": 1100.0, "to": 1400.0}
    diff = [{"before": "a\n", "after": "b\n"}, {"before_header": CONF, "before": "x\n", "after": "y\n"}]
    res = {
        "changed": True,
        "changes": [own, boot],
        "diff": diff,
        "ansible_facts": {"gpufleet_x": 1, "other": 2},
    }
    collector.add(_event("runner_on_ok", res, role="gpu_power", resolved_role="gpufleet.node.gpu_power"))
    # a template task that changed (another role's file) records its diff, but no change of its own
    collector.add(
        _event("runner_on_ok", {"changed": True, "diff": diff[1]}, task_action="ansible.builtin.template")
    )
    host = collector.hosts["node01"]
    assert host.tasks[0]["task"] == "gpufleet.node.gpu_power : a task"
    assert host.tasks[0]["changes"] == [own, boot] and host.tasks[0]["diff"] == [diff]
    assert "changes" not in host.tasks[1] and host.tasks[1]["diff"] == [diff[1]]
    assert host.changed == 2 and host.changes == [own, boot]
    # only gpufleet's own facts travel to the report
    assert host.facts == {"gpufleet_x": 1}
    assert not host.failed and not collector.finished()


def test_loop_results_are_flattened() -> None:
    collector = events.Collector()
    one = {"setting": "a", "from": 1, "to": 2}
    two = {"setting": "b", "from": 1, "to": 2}
    res = {"changed": True, "results": [{"changes": [one]}, {"changes": [two], "reboot_required": True}]}
    entry = collector.add(_event("runner_on_ok", res))
    assert entry is not None and entry["changes"] == [one, two] and entry["reboot_required"] is True
    assert collector.hosts["node01"].reboot_required


def test_a_loop_that_failed_or_lost_its_host_names_its_items_not_ansibles_summary() -> None:
    collector = events.Collector()
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
    collector.add(_event("runner_on_failed", cliff, host="node02", play="Post-maintenance gate"))
    collector.add(_event("runner_on_unreachable", lost, host="node02", play="Post-maintenance gate"))
    host = collector.hosts["node02"]
    assert [t["msg"] for t in host.tasks] == [
        "kimik3: hit rate 0.07",
        "a: Failed to connect to the host via ssh",
    ]
    assert {t["play"] for t in host.tasks} == {"Post-maintenance gate"}
    assert host.failed and host.unreachable


def test_an_ignored_failure_does_not_fail_the_host() -> None:
    collector = events.Collector()
    collector.add(_event("runner_on_failed", {"msg": "no scheduler"}, ignore_errors=True))
    collector.add(_event("runner_on_skipped"))
    host = collector.hosts["node01"]
    assert not host.failed and [t["outcome"] for t in host.tasks] == ["failed", "skipped"]


def test_the_stats_end_the_run_and_name_hosts_with_no_task_result() -> None:
    collector = events.Collector()
    collector.add(_event("runner_on_ok", {"changed": False}))
    assert (
        collector.add(
            {"event": "playbook_on_stats", "event_data": {"ok": {"node01": 1}, "skipped": {"node09": 1}}}
        )
        is None
    )
    assert collector.finished()
    assert sorted(collector.hosts) == ["node01", "node09"] and collector.hosts["node09"].tasks == []


def test_events_that_are_not_task_results_are_ignored() -> None:
    collector = events.Collector()
    assert collector.add({"event": "playbook_on_task_start", "event_data": {"task": "x"}}) is None
    assert collector.add({"event": "runner_on_ok", "event_data": {"res": {}}}) is None  # no host
    assert collector.hosts == {}


def test_ansibles_internal_type_names_are_made_plain() -> None:
    message = (
        "argument 'limit_w' is of type <class 'ansible._internal._datatag._tags._AnsibleTaggedStr'> "
        "and we were unable to convert to float"
    )
    assert (
        results.plain_types(message)
        == "argument 'limit_w' is of type str and we were unable to convert to float"
    )
    real = (
        "Validation of arguments failed:\nargument 'gpu_power_limit_w' is of type str and we were unable to "
        "convert to float: <class 'ansible.module_utils._internal._datatag._AnsibleTaggedStr'> cannot be "
        "converted to a float"
    )
    assert results.plain_types(real).endswith("convert to float: str cannot be converted to a float")


def test_a_result_ansible_runner_dropped_is_a_failure_naming_why() -> None:
    """ansible-runner passes on ``res: {}`` for a result over MAX_EVENT_RES (a node's 2 MiB product name
    carried into node_facts' result read as ok with 0 checks): a failed task that says so."""
    collector = events.Collector()
    entry = collector.add(_event("runner_on_ok", {}, task_action="gpufleet.node.node_facts"))
    assert entry is not None and (entry["outcome"], entry["changed"]) == ("failed", False)
    assert "larger than ansible-runner passes on (MAX_EVENT_RES, 700000 characters)" in entry["msg"]
    host = collector.hosts["node01"]
    assert host.failed and host.status(read_only=True) == "failed"
    assert host.failure_message().startswith("a task: its result was larger than ansible-runner passes on")
    # a failed task's dropped result too, even one whose errors were to be ignored
    collector.add(_event("runner_on_failed", {}, host="node02", ignore_errors=True))
    assert collector.hosts["node02"].failed
    # a result that is not empty, a skip and an event with no result are what they were
    assert collector.add(_event("runner_on_ok", {"changed": False}, host="node03"))["outcome"] == "ok"
    assert collector.add(_event("runner_on_skipped", {}, host="node03"))["outcome"] == "skipped"
    assert collector.add(_event("runner_on_ok", host="node03"))["outcome"] == "ok"
    assert not collector.hosts["node03"].failed


def test_ansible_runner_drops_an_oversized_result_and_the_collector_fails_it(tmp_path: Path) -> None:
    """The real ansible-runner (its callback, as AWX's job events) on a local play: a task whose result
    is over MAX_EVENT_RES arrives with ``res: {}``, and comes out failed; the small one beside it ok."""
    playbook = tmp_path / "project" / "play.yml"
    playbook.parent.mkdir()
    playbook.write_text(
        "- hosts: localhost\n  connection: local\n  gather_facts: false\n  tasks:\n"
        "    - name: small\n      ansible.builtin.set_fact:\n        small: 1\n"
        "    - name: oversized\n      ansible.builtin.set_fact:\n        big: \"{{ 'X' * 800000 }}\"\n"
    )
    collector = events.Collector()
    ansible_runner.run(
        private_data_dir=str(tmp_path),
        playbook=str(playbook),
        inventory="localhost ansible_python_interpreter=" + sys.executable,
        event_handler=lambda event: bool(collector.add(event)) and False,
        envvars={"ANSIBLE_NOCOLOR": "1", "PATH": runner.own_path(os.environ.get("PATH", ""))},
        quiet=True,
        json_mode=True,
        suppress_env_files=True,
    )
    host = collector.hosts["localhost"]
    assert [(t["task"], t["outcome"]) for t in host.tasks] == [("small", "ok"), ("oversized", "failed")]
    assert "larger than ansible-runner passes on" in host.failure_message()
