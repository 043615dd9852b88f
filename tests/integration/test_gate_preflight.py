"""`gpufleet gate` refuses a node whose role inputs are bad before it is drained (subnet 127.0.35).

post_maintenance.yml's first play runs every role's preflight (and the drain role's argument spec), so
a typo in group_vars stops the node while it is still in service, instead of after the drain play
has taken it out of its scheduler.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from gpufleet_sim import state
from gpufleet_sim.fleet import Fleet

from gpufleet import cli
from tests.integration.conftest import (
    GATE_MARKERS,
    INSTANCES,
    node_ssh,
    run_on,
    serve_as_a_passed_gate_leaves,
)

# The last role the first play checks, so every earlier check has passed when it refuses the node.
BAD_SETTING = "thermal_gate_min_prefix_cache_hit_rate"


@pytest.fixture(scope="module")
def refused(fleet_factory, tmp_path_factory) -> tuple[Fleet, int, dict[str, Any]]:
    """One Slurm node whose prefix-cache floor is out of range: one gate run."""
    fleet: Fleet = fleet_factory(nodes=1, subnet="127.0.35", slurm=True)
    host_vars = fleet.root / "host_vars"
    host_vars.mkdir(exist_ok=True)
    (host_vars / "node01.yml").write_text(f"gpufleet_drain_method: slurm\n{BAD_SETTING}: 1.5\n")
    report_dir: Path = tmp_path_factory.mktemp("gate-preflight")
    code, report = run_on(fleet, report_dir, "gate", "--burn-in-seconds", "5")
    return fleet, code, report


def test_bad_input_blocks_the_node_naming_the_setting_and_range(refused) -> None:
    _, code, report = refused
    # a configuration error: exit 2, and the report says it was the node's inputs
    assert code == cli.EXIT_USAGE
    host = report["hosts"]["node01"]
    # refused, never called blocked (GateBlocked says a blocked node was drained and stopped)
    assert host["status"] == "failed" and host["configuration_error"] is True
    assert BAD_SETTING in host["message"] and "between 0 and 1" in host["message"], host["message"]
    # refused before the drain play: the report does not say it was left drained
    assert "drained" not in host["message"], host["message"]


def test_refused_node_is_never_drained_and_nothing_changes_or_starts(refused) -> None:
    fleet, _, report = refused
    node = state.load(fleet.root / "nodes" / "node01")
    # the real Slurm never drained it
    assert fleet.slurm.changes("node01") == [] and fleet.slurm.node("node01")["State"] == "IDLE"
    host = report["hosts"]["node01"]
    assert host["changes"] == [] and host["checks"] == []
    units = node.get("units", {})
    assert [n for n, u in units.items() if n.startswith("vllm-") and u.get("active")] == []


@pytest.fixture(scope="module")
def fix_refused(refused, tmp_path_factory) -> tuple[Fleet, int, dict[str, Any]]:
    """The same node, drifted (never provisioned), with a bad rdma_qos input: one drift --fix run."""
    fleet = refused[0]
    (fleet.root / "host_vars" / "node01.yml").write_text(
        "gpufleet_drain_method: slurm\nrdma_qos_trust: lossless\n"
    )
    report_dir: Path = tmp_path_factory.mktemp("fix-preflight")
    code, report = run_on(fleet, report_dir, "drift", "--fix")
    return fleet, code, report


def test_drift_fix_refuses_bad_input_before_draining(fix_refused) -> None:
    fleet, code, report = fix_refused
    assert code == cli.EXIT_USAGE  # a configuration error, as in provision and the gate
    host = report["hosts"]["node01"]
    assert host["configuration_error"] is True
    assert host["status"] != "ok"
    # Refused by the rdma_qos module's own argument spec (drift and provision share it), naming the
    # role, the option and what is allowed.
    assert "trust must be one of: dscp, pcp, got: lossless" in host["message"], host
    assert "rdma_qos" in host["message"], host
    assert "drained" not in host["message"], host["message"]
    # never drained, in the real Slurm
    assert fleet.slurm.changes("node01") == [] and fleet.slurm.node("node01")["State"] == "IDLE"


@pytest.fixture(scope="module")
def tools_refused(fix_refused, tmp_path_factory) -> dict[str, tuple[int, dict[str, Any], Any]]:
    """The same node (the profile runs DCGM's level 2 and the all-reduce), serving with its markers,
    gated with a setting it cannot meet: each refused before the drain, nothing of it touched."""
    fleet = fix_refused[0]
    # served first with no scheduler (drain method none): serving starts with the gate's drain play
    (fleet.root / "host_vars" / "node01.yml").write_text("")
    serve_as_a_passed_gate_leaves(fleet, ["node01"])
    out = {}
    for name, setting in TOOL_SETTINGS.items():
        (fleet.root / "host_vars" / "node01.yml").write_text(f"gpufleet_drain_method: slurm\n{setting}\n")
        before = _untouched(fleet)
        report_dir: Path = tmp_path_factory.mktemp(f"refused-{name}")
        code, report = run_on(fleet, report_dir, "gate", "--burn-in-seconds", "5")
        out[name] = (code, report, (before, _untouched(fleet)))
    (fleet.root / "host_vars" / "node01.yml").write_text("gpufleet_drain_method: slurm\n")
    return out


# Settings that need no change to judge, looked for before the drain (issue 36 item 9): a tool path the
# node does not have, an NCCL floor no node can meet.
TOOL_SETTINGS = {
    "dcgmi-path": "thermal_gate_dcgmi_path: /opt/dcgm/bin/dcgmi-not-here",
    "nccl-tests-path": "thermal_gate_nccl_tests_path: /opt/nccl-tests/build/not-here",
    "nccl-floor-inf": "thermal_gate_nccl_min_busbw_gbps: .inf",
}
NAMED = {
    "dcgmi-path": ("thermal_gate_dcgmi_path is /opt/dcgm/bin/dcgmi-not-here", "not an executable file"),
    "nccl-tests-path": ("thermal_gate_nccl_tests_path is /opt/nccl-tests/build/not-here", "not there"),
    "nccl-floor-inf": ("thermal_gate_nccl_min_busbw_gbps must be above 0 and at most 10000 GB/s", "got inf"),
}


def _untouched(fleet: Fleet) -> tuple[Any, ...]:
    """What a drain or a gate would change: Slurm's drains, the units, both markers."""
    node = state.load(fleet.root / "nodes" / "node01")
    address = json.loads(fleet.fleet_file.read_text())["nodes"]["node01"]["address"]
    markers = node_ssh(fleet, address, "ls " + " ".join(GATE_MARKERS), check=False).stdout.split()
    units = {n: u.get("active") for n, u in node.get("units", {}).items() if n.startswith("vllm-")}
    return (fleet.slurm.changes("node01"), units, markers)


@pytest.mark.parametrize("name", sorted(TOOL_SETTINGS))
def test_a_setting_the_node_cannot_meet_is_refused_before_the_drain(tools_refused, name: str) -> None:
    code, report, (before, after) = tools_refused[name]
    host = report["hosts"]["node01"]
    assert code == cli.EXIT_USAGE, host
    assert host["status"] == "failed" and host["configuration_error"] is True, host
    for words in NAMED[name]:
        assert words in host["message"], host["message"]
    assert "refused before the drain: left as it was" in host["message"], host["message"]
    # still serving as it was: never drained, both instances up, both markers
    assert after == before and sorted(before[2]) == sorted(GATE_MARKERS), before
    assert all(before[1].values()) and len(before[1]) == len(INSTANCES), before
