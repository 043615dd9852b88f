"""What every gpufleet command promises before it touches a node: it runs the ansible-playbook of its
own installation (no activated venv needed) and it never connects to a node whose host key is wrong."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpufleet.sim.fleet import Fleet

# gpufleet as an operator starts it from a plain shell: the venv's script, the venv not on PATH.
GPUFLEET = Path(sys.executable).parent / "gpufleet"
PLAIN_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


@pytest.fixture(scope="module")
def fleet(fleet_factory) -> Fleet:
    started: Fleet = fleet_factory(nodes=1, subnet="127.0.71")
    return started


def _facts(fleet: Fleet, report_dir: Path) -> tuple[int, dict[str, Any], str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV",)}
    env["PATH"] = PLAIN_PATH
    argv = [str(GPUFLEET), "facts", "--inventory", str(fleet.inventory_path), "--report-dir", str(report_dir)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env, check=False)
    report_file = report_dir / "report.json"
    report = json.loads(report_file.read_text()) if report_file.exists() else {}
    return done.returncode, report, done.stderr


def test_a_node_with_the_wrong_host_key_is_never_read(fleet: Fleet, tmp_path: Path) -> None:
    # Runs first, before any ssh master to the node exists that could skip the key check.
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "impostor")], check=True
    )
    keytype, key = (tmp_path / "impostor.pub").read_text().split()[:2]
    original = fleet.known_hosts.read_text()
    fleet.known_hosts.write_text(
        "".join(f"{line.split()[0]} {keytype} {key}\n" for line in original.splitlines() if line.strip())
    )
    try:
        code, report, stderr = _facts(fleet, tmp_path / "report")
    finally:
        fleet.known_hosts.write_text(original)
    assert code == 1, stderr
    host = report["hosts"]["node01"]
    assert host["status"] == "unreachable"
    assert "host key" in host["message"].lower() or "identification has changed" in host["message"].lower()
    assert "gpufleet_gpus" not in host.get("facts", {})


def test_gpufleet_runs_its_own_ansible_from_a_plain_shell(fleet: Fleet, tmp_path: Path) -> None:
    code, report, stderr = _facts(fleet, tmp_path / "report")
    assert "not found" not in stderr
    assert code == 0, stderr
    assert report["hosts"]["node01"]["status"] == "ok"
    assert len(report["hosts"]["node01"]["facts"]["gpufleet_gpus"]) == 16
