"""How xdist shares the integration tests between its workers.

A test file's tests stay together on one worker (their module-scoped fleet starts once); molecule's
scenarios go one by one (each starts and stops its own nodes, on its own subnet). The heaviest units
start first, so that no worker is left with a long file while the others are idle at the end
(xdist's own order is by the number of tests in a unit, which says little about its cost here).
"""

from __future__ import annotations

from collections import OrderedDict

from xdist.scheduler import LoadScopeScheduling

# Worker-seconds of each unit in a full run on a 2-core machine (`--durations=0`, setup, calls and
# teardown together; 2026-12-05), rounded: only their order matters. A file not listed counts as DEFAULT_COST.
# The molecule scenarios measured again without their first destroy (2026-12-06): thermal_gate alone at load
# 2-3 (`molecule test`, 53 s); the others in one run of test_molecule.py (-n 2, load 3-9), scaled by 53/64,
# thermal_gate's own ratio between the two.
COST = {
    "test_drift.py": 370,
    "test_gate_faults.py": 340,
    "test_fail_closed.py": 280,
    "test_watch.py": 250,
    "test_node_health.py": 170,
    "test_fabric.py": 150,
    "test_gpu_roles.py": 145,
    "test_rdma_roles.py": 110,
    "test_interrupt_fleet.py": 107,
    # estimated from its tests' runs under flock, 2026-12-06 (4 Slurm nodes; five watch --act runs that
    # act, three gates after a remediation)
    "test_guardian.py": 360,
    # 1 h100-8 node, one forced reboot through the BMC
    "test_guardian_act.py": 45,
    "test_check_command.py": 95,
    "test_sim_vllm.py": 57,
    "test_molecule.py::test_scenario_passes_with_idempotence[thermal_gate]": 53,
    "test_sigterm_gate.py": 41,
    "test_molecule.py::test_scenario_passes_with_idempotence[inference_service]": 41,
    "test_molecule.py::test_scenario_passes_with_idempotence[rdma_qos]": 33,
    "test_molecule.py::test_scenario_passes_with_idempotence[rdma_link]": 32,
    "test_molecule.py::test_scenario_passes_with_idempotence[switch_qos]": 30,
    "test_molecule.py::test_scenario_passes_with_idempotence[drain]": 30,
    "test_molecule.py::test_scenario_passes_with_idempotence[nccl_topology]": 27,
    "test_molecule.py::test_scenario_passes_with_idempotence[gpu_pinning]": 25,
    "test_molecule.py::test_scenario_passes_with_idempotence[watch]": 25,
    "test_molecule.py::test_scenario_passes_with_idempotence[default]": 25,
    "test_molecule.py::test_scenario_passes_with_idempotence[gpu_power]": 24,
    "test_molecule.py::test_scenario_passes_with_idempotence[fabric]": 24,
}
DEFAULT_COST = 15
MOLECULE = "test_molecule.py"


def unit_of(nodeid: str) -> str:
    """The unit a test is scheduled with: its file, or itself for a molecule scenario."""
    path = nodeid.split("::", 1)[0]
    return nodeid if path.endswith(MOLECULE) else path


def cost_of(unit: str) -> int:
    name = unit.rsplit("/", 1)[-1]
    return COST.get(name, DEFAULT_COST)


class HeaviestFirst(LoadScopeScheduling):
    """xdist's scope scheduling with files (or molecule scenarios) as scopes, the costliest first."""

    _ordered = False

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(nodeid)

    def _assign_work_unit(self, node: object) -> None:
        # The queue is filled by schedule() just before its first assignment: order it once, here.
        if not self._ordered:
            ranked = sorted(self.workqueue.items(), key=lambda item: -cost_of(item[0]))
            self.workqueue = OrderedDict(ranked)
            self._ordered = True
        super()._assign_work_unit(node)  # type: ignore[arg-type]
