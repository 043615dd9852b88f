"""`molecule test` of the default scenario: create/destroy start and stop sim nodes, and
converge must be idempotent. Run from pytest so the orphans it leaves are reaped here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.integration.conftest import leftovers

REPO = Path(__file__).resolve().parents[2]


def test_default_scenario_passes_with_idempotence() -> None:
    bin_dir = Path(sys.executable).parent
    env = dict(os.environ)
    env["PATH"] = f"{bin_dir}:{env.get('PATH', '')}"
    env["ANSIBLE_ROLES_PATH"] = str(REPO / "roles")
    env["ANSIBLE_COLLECTIONS_PATH"] = str(REPO / ".gpufleet" / "collections")
    env["ANSIBLE_NOCOLOR"] = "1"
    env["NO_COLOR"] = "1"
    proc = subprocess.run(
        [str(bin_dir / "molecule"), "test", "-s", "default"],
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
    assert leftovers(REPO / ".gpufleet" / "molecule-sim") == []
