"""events.HostResult: what stopped a host, and whether it was its inputs (exit 2) or the node (exit 1)."""

from __future__ import annotations

from gpufleet.runner import INPUTS_PLAY, HostResult


def _host(*tasks: dict[str, object], **flags: bool) -> HostResult:
    host = HostResult.from_tasks("node01", list(tasks))
    # the outcome of each task is what makes the host failed or unreachable
    assert all(getattr(host, flag) == value for flag, value in flags.items())
    return host


def test_an_unreachable_host_says_where_it_was_lost() -> None:
    host = _host(
        {"task": "Start the instances", "outcome": "unreachable", "msg": "glm52: Failed to connect"},
        unreachable=True,
    )
    assert host.failure_message() == "became unreachable at 'Start the instances': glm52: Failed to connect"


def test_a_failure_in_the_inputs_play_or_a_module_input_error_is_configuration() -> None:
    bad_input = {"task": "Check rdma_qos_cnp_dscp", "outcome": "failed", "msg": "0..63", "play": INPUTS_PLAY}
    assert _host(bad_input, failed=True).refused_for_input()
    drift = {"task": "node_facts", "outcome": "failed", "msg": "gpu_power: ...", "input_error": True}
    assert _host(drift, failed=True).refused_for_input()
    node = {"task": "Plan every role on the node", "outcome": "failed", "msg": "GPU gone", "play": "Gate"}
    assert not _host(node, failed=True).refused_for_input()
    assert _host(node, failed=True).failure_message() == "Plan every role on the node: GPU gone"
