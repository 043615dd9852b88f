"""SIGINT during `gpufleet drift --fix` on a real (simulated) fleet: the batch under way finishes,
no other starts, the report names every node's state, exit 1, and no playbook is left running.
Two SIGINTs during the gate's burn-in: the gate stops, what it started is stopped, the report and the
next drift name the nodes left drained."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from gpufleet_sim import control, state
from gpufleet_sim.fleet import Fleet

from tests.integration.conftest import GPUFLEET, gate_process, node_ssh


@pytest.fixture(scope="module")
def fleet(fleet_factory) -> Fleet:
    started: Fleet = fleet_factory(nodes=2, subnet="127.0.72", slurm=True)
    return started


def _playbooks_running(marker: str) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if proc.name.isdigit() and b"ansible-playbook" in cmdline and marker.encode() in cmdline:
            found.append(proc.name)
    return found


def test_sigint_finishes_the_batch_and_starts_no_other(fleet: Fleet, tmp_path: Path) -> None:
    for node in ("node01", "node02"):
        control.fault(fleet, node, "pfc-off", clear=False)
    report_dir = tmp_path / "report"
    argv = [str(GPUFLEET), "drift", "--fix", "--batch", "1", "--inventory", str(fleet.inventory_path)]
    argv += ["--vault-password-file", str(fleet.vault_password_file), "--report-dir", str(report_dir)]
    env = dict(os.environ, GPUFLEET_STATE_DIR=str(tmp_path / "state"))
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    assert proc.stdout is not None
    seen = []
    deadline = time.monotonic() + 600
    for line in proc.stdout:
        seen.append(line)
        if "drift --fix: batch 1/2" in line:
            time.sleep(2)  # the batch's playbook is running
            proc.send_signal(signal.SIGINT)
        assert time.monotonic() < deadline, "".join(seen[-20:])
    assert proc.wait(timeout=60) == 1, "".join(seen[-20:])
    output = "".join(seen)
    assert "SIGINT: finishing the work under way and starting nothing new" in output
    assert "batch 2/2" not in output
    hosts = json.loads((report_dir / "report.json").read_text())["hosts"]
    assert (hosts["node01"]["status"], hosts["node01"]["message"]) == ("changed", "fixed in batch 1")
    assert hosts["node02"]["status"] == "interrupted"
    assert hosts["node02"]["message"].startswith("not started: gpufleet was interrupted (SIGINT)")
    assert _playbooks_running(str(fleet.inventory_path)) == []


def _gate(fleet: Fleet, tmp_path: Path, name: str, signals: int) -> tuple[int, dict, str]:
    """`gpufleet gate` with ``signals`` SIGINTs sent during the burn-in: (exit status, hosts, output)."""
    host_vars = fleet.root / "host_vars"
    host_vars.mkdir(exist_ok=True)
    for node in ("node01", "node02"):
        (host_vars / f"{node}.yml").write_text("gpufleet_drain_method: slurm\n")
    report_dir = tmp_path / name
    # the per-task lines tell when the burn-in starts
    proc = gate_process(fleet, tmp_path, report_dir, 20)
    assert proc.stdout is not None
    seen, healthy = [], 0
    for line in proc.stdout:
        seen.append(line)
        healthy += "Wait until each instance is healthy" in line
        if healthy == 2:  # both nodes serve: the burn-in is next
            healthy += 1
            time.sleep(3)
            for _ in range(signals):
                proc.send_signal(signal.SIGINT)
                time.sleep(1)
    code = proc.wait(timeout=120)
    return code, json.loads((report_dir / "report.json").read_text())["hosts"], "".join(seen)


def test_a_second_sigint_stops_the_gate_and_the_next_run_finds_the_nodes_left_drained(
    fleet: Fleet, tmp_path: Path
) -> None:
    """The first signal would let the gate finish (as drift --fix's batch); the second stops it."""
    for node in ("node01", "node02"):
        control.fault(fleet, node, None, clear=True)
    code, hosts, output = _gate(fleet, tmp_path, "twice", signals=2)
    assert "SIGINT: finishing the work under way" in output
    assert code == 1, output[-2000:]
    for number, name in enumerate(("node01", "node02"), start=2):
        assert hosts[name]["status"] == "interrupted"
        # the drain task the events name, then what the gate's stop did
        drained = "; left drained by 'gpufleet.node.drain : Drain the node in Slurm'; instances stopped"
        assert drained + ", markers withdrawn" in hosts[name]["message"], hosts[name]
        # what the stopped gate had started is stopped: nothing serves on a node it did not admit
        units = state.load(fleet.root / "nodes" / name).get("units", {})
        assert [bool(units.get(f"vllm-{i}.service", {}).get("active")) for i in ("glm52", "kimik3")] == [
            False,
            False,
        ]
        markers = node_ssh(fleet, f"127.0.72.{number}", "ls /run/gpufleet", check=False).stdout.split()
        assert markers == [], markers
        # and the real Slurm holds it drained, for the gate's reason
        slurm_node = fleet.slurm.node(name)
        assert (slurm_node["State"], slurm_node.get("Reason")) == (
            "IDLE+DRAIN",
            "gpufleet gate (post-maintenance)",
        )
    assert _playbooks_running(str(fleet.inventory_path)) == []
    report_dir = tmp_path / "drift"
    argv = [str(GPUFLEET), "drift", "--inventory", str(fleet.inventory_path), "--report-dir", str(report_dir)]
    argv += ["--vault-password-file", str(fleet.vault_password_file)]
    assert subprocess.run(argv, capture_output=True, text=True, timeout=600).returncode == 1
    drift = json.loads((report_dir / "report.json").read_text())["hosts"]
    for name in ("node01", "node02"):
        left = [c for c in drift[name]["checks"] if c["name"] == "drain.left_drained"]
        assert [(c["ok"], c["value"]) for c in left] == [(False, "slurm: gpufleet gate (post-maintenance)")]
