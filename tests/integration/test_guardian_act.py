"""playbooks/guardian_act.yml on a simulated node over its real sshd and BMC (issue 39): a hung node
(node-hung: SSH answers nothing, the BMC's graceful reset goes unanswered) rebooted with ForceRestart after
the graceful timeout, then quarantined. The guardian's whole path (the watch, the reboot and the GPU reset,
the gate, the history) is tests/integration/test_guardian.py's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from gpufleet_sim import faults, state
from gpufleet_sim.fleet import Fleet

from tests.integration.conftest import node_ssh

REPO = Path(__file__).resolve().parents[2]
SUBNET = "127.0.139"
HISTORY = "/var/lib/gpufleet/remediation-history.json"


@pytest.fixture(scope="module")
def fleet(fleet_factory: Any) -> Fleet:
    started: Fleet = fleet_factory(nodes=1, subnet=SUBNET, profile="h100-8")
    return started


def address(fleet: Fleet) -> str:
    return f"{SUBNET}.2"


def act(
    fleet: Fleet, tmp_path: Path, reason: str, classes: list[str], remediation: str = "reboot"
) -> subprocess.CompletedProcess[str]:
    extra = tmp_path / "extra.json"
    extra.write_text(
        json.dumps(
            {
                "guardian_actions": {
                    "node01": {
                        "reason": reason,
                        "classes": classes,
                        "checks": ["health.gpu_count"],
                        "remediation": remediation,
                        "replace_hardware": False,
                    }
                },
                "guardian_reboot_graceful_timeout_s": 8,
                "guardian_reboot_boot_timeout_s": 120,
            }
        )
    )
    env = dict(os.environ, ANSIBLE_NOCOLOR="1")
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(fleet.inventory_path)]
    argv += ["--vault-password-file", str(fleet.vault_password_file), "-e", f"@{extra}", "--limit", "node01"]
    return subprocess.run(
        [*argv, "playbooks/guardian_act.yml"], capture_output=True, text=True, cwd=REPO, env=env, timeout=400
    )


def history(fleet: Fleet) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = json.loads(node_ssh(fleet, address(fleet), f"cat {HISTORY}").stdout)[
        "events"
    ]
    return events


def node_dir(fleet: Fleet) -> Path:
    return fleet.root / "nodes" / "node01"


def test_a_hung_node_is_forced_after_the_graceful_timeout_then_quarantined(
    fleet: Fleet, tmp_path: Path
) -> None:
    node_ssh(fleet, address(fleet), "rm -f /var/lib/gpufleet/drained")  # as the gate would have returned it
    assert faults.inject(node_dir(fleet), "node-hung")
    done = act(fleet, tmp_path, "gpufleet watch: node does not answer", ["gpu_lost"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "node-hung" not in state.load(node_dir(fleet))["faults"]  # the forced power cycle ended it
    quarantine, reboot = history(fleet)[-2:]
    assert quarantine["action"] == "quarantine" and reboot["action"] == "reboot"
    assert "GracefulRestart sent " in reboot["detail"] and ", then ForceRestart sent " in reboot["detail"]
