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
# teardown together, 3 workers; 2026-12-07, 803 s, 2,378 worker-seconds), rounded: only their order
# matters. A unit not listed counts as DEFAULT_COST.
COST = {
    "test_guardian.py": 311,
    "test_node_health.py": 256,
    "test_gate_faults.py": 243,
    "test_watch.py": 217,
    "test_drift.py": 216,
    "test_fail_closed.py": 172,
    "test_fabric.py": 97,
    "test_cli_safety.py": 72,
    "test_gpu_roles.py": 69,
    "test_sim_vllm.py": 60,
    "test_interrupt_fleet.py": 53,
    "test_fleet_versions_known.py": 49,
    "test_molecule.py::test_scenario_passes_with_idempotence[thermal_gate]": 47,
    "test_rdma_roles.py": 43,
    "test_link_flap_settle.py": 43,
    "test_guardian_act.py": 42,
    "test_check_command.py": 38,
    "test_molecule.py::test_scenario_passes_with_idempotence[inference_service]": 33,
    "test_sigterm_gate.py": 28,
    "test_switch_interrupt.py": 27,
    "test_gate_preflight.py": 22,
    "test_sim_bmc.py": 21,
    "test_molecule.py::test_scenario_passes_with_idempotence[watch]": 20,
    "test_molecule.py::test_scenario_passes_with_idempotence[drain]": 20,
    "test_molecule.py::test_scenario_passes_with_idempotence[switch_qos]": 18,
    "test_molecule.py::test_scenario_passes_with_idempotence[nccl_topology]": 17,
    "test_sonic_leaf.py": 16,
    "test_molecule.py::test_scenario_passes_with_idempotence[rdma_link]": 16,
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
