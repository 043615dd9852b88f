"""An nvidia-smi -q -x that prints one oversized field (the simulator's nvsmi-oversized-field: a 2 MiB
product name) is refused by name in every reader a command uses, and what the module returns stays
small: node_health's read (the gate, the watch), node_versions (drift), gpu_facts (provision, check).
A result over ansible-runner's MAX_EVENT_RES reached the controller empty: the node read as ok with 0
checks (events.dropped_result fails such a result too)."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.gpu import gpu_health_readings
from ansible_collections.gpufleet.node.plugins.module_utils.node import node_health, node_versions, watch
from ansible_collections.gpufleet.node.plugins.module_utils.rdma import rdma_read
from ansible_collections.gpufleet.node.plugins.modules import gpu_facts
from gpufleet_sim import faults

from tests.unit.modules import harness
from tests.unit.modules.simnode import SMI, SimNode

# what every reader must say: the field, its GPU, its length and the limit
REFUSAL = (
    "nvidia-smi -q -x: the text of <product_name> of GPU '00000000:13:00.0' is 2097152 characters long "
    "(nvidia-smi prints no field over 1024): "
    "'NVIDIA B300 SXM6 ACXXXXXXXXXXXXXXXXXXXXX'... (2097152 characters)"
)


@pytest.fixture
def node(tmp_path: Path):
    sim = SimNode(tmp_path / "node")
    faults.inject(sim.dir, "nvsmi-oversized-field")
    with mock.patch.object(rdma_read, "SYSFS_ROOT", str(sim.dir)):
        yield sim


def run_command(node: SimNode):
    def run(args: list[str], **kwargs: Any) -> tuple[int, str, str]:
        return node(None, args, **kwargs)

    return run


def test_the_health_read_of_the_gate_and_the_watch_refuses_it(node: SimNode) -> None:
    with pytest.raises(node_health.ReadError) as err:
        node_health.read(run_command(node), SMI, None, False)
    assert str(err.value) == REFUSAL
    with pytest.raises(gpu_health_readings.ParseError, match="no field over 1024"):
        gpu_health_readings.parse_health_xml(node(None, [SMI, "-q", "-x"], environ_update={"LC_ALL": "C"})[1])


def test_the_watch_names_it_as_its_failed_health_check(node: SimNode) -> None:
    w = watch.Watch(run_command(node), SMI, 0, None, [], [], health={"expected_gpu_count": 16})
    (failed,), fact = w._health()
    assert (failed["name"], failed["ok"], fact) == ("watch.health", False, None)
    assert failed["message"] == f"the node's health could not be read: {REFUSAL} (fail closed)"


def test_drift_names_it_in_the_versions_check(node: SimNode) -> None:
    module = mock.Mock(
        run_command=lambda args, **kw: node(None, args, **kw), get_bin_path=lambda *a, **k: SMI
    )
    found, (failed,) = node_versions.read(module)
    assert found is None and (failed["name"], failed["ok"]) == ("fleet.versions", False)
    assert REFUSAL in failed["message"]


def test_gpu_facts_fails_with_a_small_result_naming_it(node: SimNode) -> None:
    """provision's and check's read of the GPUs (the gpu_power, nccl_topology, gpu_pinning roles)."""
    result = harness.run_module(gpu_facts.main, {}, run_command=node, get_bin_path=SMI).result
    assert result["failed"] is True
    assert result["msg"] == (
        f"Could not read the output of {SMI} -q -x: {REFUSAL}. "
        "Run it by hand on this node to see what it prints."
    )
    assert len(result["stdout"]) < 20_000 and result["stdout"].endswith("more characters not kept]")
    assert len(str(result)) < 40_000
