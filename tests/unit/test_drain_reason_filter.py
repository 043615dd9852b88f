"""gpufleet.node.drain_reason: a failed task's result (ansible_failed_result in the gate's rescue) ->
the drain reason that names its failed checks (the text itself: module_utils/node/drain_state.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from ansible_collections.gpufleet.node.plugins.filter.drain_reason import FilterModule, drain_reason
from ansible_collections.gpufleet.node.plugins.module_utils.node import drain_state

REPO = Path(__file__).resolve().parents[2]
XID = {"name": "health.xid[0000:1b:00.0]", "ok": False, "value": 79, "limit": "no blocking Xid", "unit": ""}


def test_the_failed_checks_of_a_result_and_of_its_loop_items() -> None:
    assert FilterModule().filters() == {"drain_reason": drain_reason}
    result = {"failed": True, "msg": "1 of 40 checks failed", "checks": [dict(XID, ok=True)]}
    assert drain_reason(dict(result, checks=[XID])) == "gpufleet gate: health.xid[0000:1b:00.0] 79"
    looped = dict(result, results=[{"checks": [XID], "failed": True, "msg": "x"}, "not a result"])
    assert drain_reason(looped) == "gpufleet gate: health.xid[0000:1b:00.0] 79"


def test_without_a_failed_check_the_task_and_its_message() -> None:
    result = {"failed": True, "msg": "vllm-0 not healthy\nafter 600 s"}
    assert drain_reason(result, "gate", "Start the instances") == (
        "gpufleet gate: Start the instances: vllm-0 not healthy after 600 s"
    )
    assert drain_reason(None) == "gpufleet gate: blocked"
    assert drain_state.is_ours(drain_reason({"msg": "x" * 500}, "gate", "t"))


def test_ansible_runs_the_filter_under_its_collection_name() -> None:
    done = subprocess.run(
        [
            str(REPO / ".venv/bin/ansible"),
            "localhost",
            "-m",
            "ansible.builtin.debug",
            "-a",
            "msg={{ {'checks': [{'name': 'coolant.flow_lpm[loop1]', 'ok': false, 'value': 4.2, "
            "'unit': 'L/min'}]} | gpufleet.node.drain_reason('gate') }}",
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr
    assert "gpufleet gate: coolant.flow_lpm[loop1] 4.2 L/min" in done.stdout, done.stdout
