"""`molecule test` of every scenario: create/destroy start and stop sim nodes, and converge
must be idempotent. Run from pytest so the orphans molecule leaves are reaped here.

Each run starts from nothing without a destroy step of its own (an ansible-playbook run, ~2 s): its
molecule state is a fresh directory of the test's, and a fleet a killed run left is stopped first."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from gpufleet_sim import control
from gpufleet_sim.fleet import Fleet

from tests.integration.conftest import leftovers

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = sorted(p.parent.name for p in (REPO / "molecule").glob("*/molecule.yml"))


def test_default_scenario_exists() -> None:
    assert "default" in SCENARIOS


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_scenario_passes_with_idempotence(scenario: str, tmp_path: Path) -> None:
    sim_dir = REPO / ".gpufleet" / f"molecule-{scenario}"
    control.down(Fleet(sim_dir))  # what a run killed before its destroy left (raises if it cannot)
    bin_dir = Path(sys.executable).parent
    env = dict(os.environ)
    # molecule's state (created, converged) and its inventory: this run's, never a killed run's
    env["MOLECULE_EPHEMERAL_DIRECTORY"] = str(tmp_path / "molecule")
    env["PATH"] = f"{bin_dir}:{env.get('PATH', '')}"
    env["ANSIBLE_ROLES_PATH"] = str(REPO / "roles")
    env["ANSIBLE_COLLECTIONS_PATH"] = str(REPO / ".gpufleet" / "collections")
    env["ANSIBLE_NOCOLOR"] = "1"
    env["NO_COLOR"] = "1"
    proc = subprocess.run(
        [str(bin_dir / "molecule"), "test", "-s", scenario],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    assert "idempotence" in output.lower()
    assert "All assertions passed" in output
    assert leftovers(sim_dir) == []
