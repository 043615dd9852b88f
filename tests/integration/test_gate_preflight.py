"""`gpufleet gate` refuses a node whose role inputs are bad before it is drained (subnet 127.0.35).

post_maintenance.yml's first play runs every role's preflight (and the drain role's argument spec), so
a typo in group_vars stops the node while it is still in service, instead of after the drain play
has taken it out of its scheduler.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpufleet import cli
from gpufleet.sim import state
from gpufleet.sim.fleet import Fleet
from tests.integration.conftest import run_on

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
    assert host["status"] == "blocked" and host["configuration_error"] is True
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
