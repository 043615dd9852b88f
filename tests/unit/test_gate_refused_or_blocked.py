"""The gate's one rule for a node that does not pass: an operator's input error (or another run's
lock) before the drain is refused, the node left as it was, status failed, never blocked; a node found
unfit at any step, before the drain too, is blocked, its instances stopped (the rescue ran
roles/thermal_gate/tasks/blocked.yml) and, with a scheduler, left drained."""

from __future__ import annotations

from typing import Any

from gpufleet import commands
from gpufleet.runner import HostResult

JUDGE_PLAY = "Judge each node before it is drained"
INPUTS_PLAY = "Check every role's inputs before any node is drained"
PLAN = "Read the node once and compare it with rdma_link, rdma_qos, fabric, gpu_power, nccl_topology"


def _task(task: str, play: str, outcome: str = "ok", **res: Any) -> dict[str, Any]:
    return {"task": task, "play": play, "outcome": outcome, "changed": False, "msg": "", **res}


def _blocked_there(play: str) -> list[dict[str, Any]]:
    """What playbooks/tasks/unfit_before_drain.yml does to a node found unfit: drain, stop, fail."""
    return [
        _task("gpufleet.node.drain : Drain the node in Slurm", play, changed=True),
        _task("gpufleet.node.thermal_gate : Stop the instances", play, changed=True),
        _task(
            "gpufleet.node.thermal_gate : Keep the node out of service", play, "failed", msg="did not pass"
        ),
    ]


def test_a_setting_the_node_cannot_meet_is_refused_not_blocked() -> None:
    plan = _task(PLAN, JUDGE_PLAY, "failed", msg="gpu_power: 1500 W is beyond the range", input_error=True)
    refuse = _task("Refuse a setting the node cannot meet, the node left as it was", JUDGE_PLAY, "failed")
    host = commands.gate_host(HostResult.from_tasks("node01", [plan, refuse]))
    assert host.status == "failed" and host.configuration_error is True
    assert host.message.endswith("refused before the drain: left as it was, nothing of it stopped")
    assert "1500 W" in host.message


def test_a_role_input_refused_in_the_first_play_is_refused_not_blocked() -> None:
    bad = _task("gpufleet.node.thermal_gate : Check the NCCL all-reduce inputs", INPUTS_PLAY, "failed")
    host = commands.gate_host(HostResult.from_tasks("node01", [bad]))
    assert host.status == "failed" and host.configuration_error is True


def test_a_node_found_unfit_before_the_drain_is_blocked_and_left_drained() -> None:
    plan = _task(PLAN, JUDGE_PLAY, "failed", msg="fabric.neighbor[mlx5_6]: crossed with mlx5_7")
    host = commands.gate_host(HostResult.from_tasks("node01", [plan, *_blocked_there(JUDGE_PLAY)]))
    assert host.status == "blocked" and host.configuration_error is False
    assert host.message.startswith(f"did not pass the post-maintenance gate at {PLAN}: fabric.neighbor")
    assert host.message.endswith("; left drained") and "left as it was" not in host.message


def test_without_a_scheduler_a_node_found_unfit_is_still_blocked() -> None:
    """gpufleet_drain_method none: nothing drains, the instances were still stopped."""
    bmc = _task("gpufleet.node.thermal_gate : Read the coolant loops from the BMC", JUDGE_PLAY, "failed")
    tasks = [bmc, *_blocked_there(JUDGE_PLAY)[1:]]
    host = commands.gate_host(HostResult.from_tasks("node01", tasks))
    assert host.status == "blocked" and "left as it was" not in host.message


def test_another_runs_lock_is_refused_not_blocked() -> None:
    held = _task("Hold the node for this run", JUDGE_PLAY, "failed", msg="held by gpufleet gate by ops")
    host = commands.gate_host(HostResult.from_tasks("node01", [held]))
    assert host.status == "failed" and "refused before the drain: left as it was" in host.message
