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
# teardown together, 3 workers; 2026-12-07, 1,072 s), rounded: only their order matters. A unit not
# listed counts as DEFAULT_COST.
COST = {
    "test_guardian.py": 485,
    "test_fail_closed.py": 334,
    "test_gate_faults.py": 307,
    "test_drift.py": 298,
    "test_watch.py": 290,
    "test_node_health.py": 283,
    "test_fabric.py": 112,
    "test_gpu_roles.py": 93,
    "test_cli_safety.py": 88,
    "test_interrupt_fleet.py": 68,
    "test_sim_vllm.py": 59,
    "test_rdma_roles.py": 59,
    "test_link_flap_settle.py": 51,
    "test_molecule.py::test_scenario_passes_with_idempotence[thermal_gate]": 51,
    "test_fleet_versions_known.py": 51,
    "test_check_command.py": 45,
    "test_molecule.py::test_scenario_passes_with_idempotence[inference_service]": 43,
    "test_guardian_act.py": 42,
    "test_gate_preflight.py": 33,
    "test_molecule.py::test_scenario_passes_with_idempotence[watch]": 31,
    "test_sigterm_gate.py": 29,
    "test_switch_interrupt.py": 29,
    "test_molecule.py::test_scenario_passes_with_idempotence[rdma_qos]": 25,
    "test_molecule.py::test_scenario_passes_with_idempotence[switch_qos]": 25,
    "test_molecule.py::test_scenario_passes_with_idempotence[fabric]": 23,
    "test_molecule.py::test_scenario_passes_with_idempotence[gpu_power]": 23,
    "test_molecule.py::test_scenario_passes_with_idempotence[nccl_topology]": 22,
    "test_molecule.py::test_scenario_passes_with_idempotence[rdma_link]": 21,
    "test_molecule.py::test_scenario_passes_with_idempotence[default]": 21,
    "test_molecule.py::test_scenario_passes_with_idempotence[drain]": 21,
    "test_molecule.py::test_scenario_passes_with_idempotence[gpu_pinning]": 21,
    "test_facts_command.py": 20,
    "test_sonic_leaf.py": 19,
    "test_sim_bmc.py": 18,
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
