"""node_facts' comparison runs roles and ports concurrently, yet each command once and in a
deterministic order of results."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.core import plan_node
from ansible_collections.gpufleet.node.plugins.module_utils.core.role_plan import Plan
from ansible_collections.gpufleet.node.plugins.module_utils.node import drift


class FakeModule:
    def __init__(self, delay: float = 0.0) -> None:
        self.calls: list[tuple[str, ...]] = []
        self.delay = delay
        self.lock = threading.Lock()

    def run_command(self, args: list[str], **kwargs: Any) -> tuple[int, str, str]:
        with self.lock:
            self.calls.append(tuple(args))
        time.sleep(self.delay)
        if args[0] == "boom":
            raise OSError("boom failed")
        return 0, " ".join(args), ""


def test_a_command_asked_for_by_many_threads_runs_once() -> None:
    module = FakeModule(delay=0.2)
    commands = plan_node.Commands(module)
    answers: list[tuple[int, str, str]] = []
    threads = [
        threading.Thread(target=lambda: answers.append(commands.run(["nvidia-smi", "topo", "-m"], {})))
        for _ in range(6)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert module.calls == [("nvidia-smi", "topo", "-m")]
    assert answers == [(0, "nvidia-smi topo -m", "")] * 6
    # A different environment is a different command.
    commands.run(["nvidia-smi", "topo", "-m"], {"environ_update": {"LC_ALL": "C"}})
    assert len(module.calls) == 2


def test_an_empty_answer_with_rc_0_is_read_again() -> None:
    """AnsibleModule.run_command can drop a tool's output under thread contention (see plan_node)."""
    answers = [(0, "", ""), (0, "", ""), (0, "ok", "")]
    module = FakeModule()
    module.run_command = lambda args, **kwargs: answers.pop(0)  # type: ignore[method-assign]
    assert plan_node.Commands(module).run(["ethtool", "-a", "ens21np0"], {}) == (0, "ok", "")
    answers[:] = [(0, "", "")] * 3
    assert plan_node.Commands(module).run(["true"], {}) == (0, "", "")
    assert answers == []  # three runs, then the empty answer stands
    answers[:] = [(1, "", "")]
    assert plan_node.Commands(module).run(["false"], {}) == (1, "", "")


def test_a_failed_command_fails_every_caller() -> None:
    commands = plan_node.Commands(FakeModule())
    for _ in range(2):
        with pytest.raises(OSError, match="boom failed"):
            commands.run(["boom"], {})


def test_parallel_keeps_the_order_and_raises_the_first_failure_in_order() -> None:
    barrier = threading.Barrier(4, timeout=10)
    node = plan_node.PlanNode(FakeModule())

    def work(item: int) -> int:
        barrier.wait()  # only passes when all four run at once
        return item * 10

    assert plan_node.parallel(node, [1, 2, 3, 4], work) == [10, 20, 30, 40]

    def fails(item: int) -> int:
        if item in (2, 3):
            raise plan_node.RoleFailed(f"port {item}")
        return item

    with pytest.raises(plan_node.RoleFailed, match="port 2"):
        plan_node.parallel(node, [1, 2, 3, 4], fails)


def test_a_module_runs_the_ports_in_order_one_at_a_time() -> None:
    seen: list[int] = []
    assert plan_node.parallel(FakeModule(), [1, 2, 3], lambda i: seen.append(i) or i) == [1, 2, 3]
    assert seen == [1, 2, 3]


def test_roles_run_together_share_commands_and_report_in_role_order(monkeypatch: pytest.MonkeyPatch) -> None:
    roles = list(drift.ROLES)
    barrier = threading.Barrier(len(roles), timeout=10)

    def plan(role: str):
        def run(node: plan_node.PlanNode, params: dict[str, Any]) -> Plan:
            assert node.check_mode is True
            barrier.wait()  # every role is being planned at the same time
            node.run_command(["nvidia-smi", "--query-gpu=index"], environ_update={"LC_ALL": "C"})
            if role == "gpu_power":
                node.fail_json(msg="nvidia-smi lists no GPU")
            return Plan(changes=[{"setting": f"{role}.x", "from": params["n"], "to": 1}])

        return run

    for role, utils in drift.ROLES.items():
        monkeypatch.setattr(utils, "plan", plan(role))
    module = FakeModule(delay=0.05)
    results = drift.compare_roles(module, {role: {"n": i} for i, role in enumerate(roles)})
    assert list(results) == roles
    assert module.calls == [("nvidia-smi", "--query-gpu=index")]
    assert results["gpu_power"] == {"changes": [], "checks": [], "error": "nvidia-smi lists no GPU"}
    assert results["rdma_qos"]["changes"] == [{"setting": "rdma_qos.x", "from": 1, "to": 1}]
    assert results["gpu_power"]["error"]
    # provision stops the node at the role whose module fails: what follows is not reported either
    assert results["nccl_topology"] == {
        "changes": [],
        "checks": [],
        "error": None,
        "not_compared": "gpu_power failed first; provision stops the node there",
    }
