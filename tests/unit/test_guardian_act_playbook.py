"""playbooks/guardian_act.yml and guardian_record.yml on one local node, as gpufleet watch --act runs them:
its GPUs the simulator's (nvidia-smi on PATH is the fake one on a built node's state: its real refusal),
its drain the site's command (it records its argv), its history a file. A row remap quarantined and reset:
drained with the reason, the history's quarantine and gpu_reset events, the pending remap applied; a node
already out of service (its drain record) fails guardian.already_out with nothing changed; replace_hardware
records the mark and resets nothing; a reset refused (a process on a GPU) leaves the node drained with the
failure in its history and fails it; every task named by its step; the run lock given back each time.
The reboot's action plugin is tested against the simulator's BMC in test_bmc_reset_action."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from gpufleet_sim import build, faults, state
from gpufleet_sim.tools import vllm_engine

from tests.unit.machine_run_lock import machine_run_lock  # noqa: F401  (autouse: one test at a time)

REPO = Path(__file__).resolve().parents[2]
REASON = "gpufleet watch: health.row_remap_pending[GPU-x] true"
LOCK = Path("/run/gpufleet/run-lock.json")


class Node:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.sim = tmp_path / "sim"
        self.sim.mkdir()
        state.save(self.sim, build.build_node_state("node01", "h100-8", 1))
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        smi = bin_dir / "nvidia-smi"
        smi.write_text(
            f"#!{sys.executable}\nimport sys\nfrom pathlib import Path\n"
            "from gpufleet_sim.tools import nvidia_smi\n"
            f"sys.exit(nvidia_smi.main(sys.argv[1:], Path({str(self.sim)!r})))\n"
        )
        smi.chmod(0o755)
        drain = bin_dir / "site-drain"
        drain.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path / "drained-by"}\n')
        drain.chmod(0o755)
        self.path = f"{bin_dir}:{os.environ['PATH']}"
        self.history = tmp_path / "h.json"
        self.record = tmp_path / "drained"

    def play(self, playbook: str, extra: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        inventory = self.tmp / "hosts.ini"
        t = self.tmp
        inventory.write_text(
            "[gpu_nodes]\n"
            f"node-a ansible_connection=local ansible_python_interpreter={sys.executable} "
            f"guardian_history_path={self.history} drain_record_path={self.record} "
            f"gpufleet_drain_method=command gpufleet_drain_command='[\"{t / 'bin' / 'site-drain'}\"]' "
            "gpufleet_undrain_command='[\"/bin/true\"]' "
            "gpufleet_bmc_address=https://127.0.0.1:9 gpufleet_bmc_username=admin gpufleet_bmc_password=x "
            f"thermal_gate_start_marker={t / 'started'} thermal_gate_passed_marker={t / 'passed'}\n"
        )
        holder = {
            "id": f"test-guardian-{os.getpid()}",
            "user": "test",
            "command": "gpufleet watch --act",
            "controller": "test",
            "pid": os.getpid(),
            "started": "2026-12-06T21:00:00Z",
        }
        extra_file = self.tmp / "extra.json"
        extra_file.write_text(json.dumps({**extra, "gpufleet_run": holder}))
        env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_PYTHON_INTERPRETER=sys.executable, PATH=self.path)
        env["ANSIBLE_COLLECTIONS_PATH"] = str(REPO / ".gpufleet" / "collections")
        argv = [
            str(Path(sys.executable).parent / "ansible-playbook"),
            "-i",
            str(inventory),
            "-e",
            f"@{extra_file}",
        ]
        return subprocess.run(
            [*argv, f"playbooks/{playbook}"],
            capture_output=True,
            text=True,
            check=False,
            cwd=REPO,
            env=env,
            timeout=300,
        )

    def events(self) -> list[dict[str, Any]]:
        if not self.history.exists():
            return []
        events: list[dict[str, Any]] = json.loads(self.history.read_text())["events"]
        return events

    def gpus(self) -> list[dict[str, Any]]:
        return state.present_gpus(state.load(self.sim))


def actions(remediation: str, replace_hardware: bool = False) -> dict[str, Any]:
    return {
        "guardian_actions": {
            "node-a": {
                "reason": REASON,
                "classes": ["row_remap"],
                "checks": ["health.row_remap_pending[GPU-x]"],
                "remediation": remediation,
                "replace_hardware": replace_hardware,
            }
        }
    }


@pytest.fixture
def node(tmp_path: Path) -> Node:
    return Node(tmp_path)


def test_a_row_remap_quarantined_and_every_gpu_reset(node: Node) -> None:
    assert faults.inject(node.sim, "row-remap-pending")
    done = node.play("guardian_act.yml", actions("gpu_reset"))
    assert done.returncode == 0, done.stdout + done.stderr
    # every step named, in order
    out = done.stdout
    steps = [
        "Quarantine: check the node is not already out of service",
        "Take the node out of its scheduler",
        "Withdraw the markers and stop the instances",
        "Quarantine: record it in the node's history",
        "GPU reset: reset every GPU",
        "GPU reset: record it in the node's history",
        "Release the node held for this run",
    ]
    assert [out.index(s) for s in steps] == sorted(out.index(s) for s in steps)
    assert node.record.read_text() == f"command: {REASON}\n"
    assert (node.tmp / "drained-by").read_text().strip() == "node-a"
    quarantine, reset = node.events()
    assert (quarantine["class"], quarantine["action"], quarantine["outcome"]) == (
        "row_remap",
        "quarantine",
        "ok",
    )
    assert quarantine["checks"] == ["health.row_remap_pending[GPU-x]"] and quarantine["detail"] == REASON
    assert (reset["action"], reset["outcome"]) == ("gpu_reset", "ok")
    assert reset["detail"].startswith("reset all 8 GPU(s) (nvidia-smi -r), persistence mode turned off on 8")
    assert quarantine["run"] == reset["run"] == f"test-guardian-{os.getpid()}"
    assert not any(g["remapped_rows"]["pending"] for g in node.gpus())
    assert not any(g["persistence_mode"] for g in node.gpus())  # left off for the gate's gpu_power
    assert not LOCK.exists()


def test_a_node_already_out_of_service_is_left_as_it_is(node: Node) -> None:
    node.record.write_text("command: gpufleet gate: health.xid[0000:1b:00.0] 79\n")
    done = node.play("guardian_act.yml", actions("gpu_reset"))
    assert done.returncode != 0
    assert (
        "guardian.already_out" in done.stdout
        and "gpufleet already took this node out of service" in done.stdout
    )
    assert node.record.read_text() == "command: gpufleet gate: health.xid[0000:1b:00.0] 79\n"
    assert node.events() == [] and not (node.tmp / "drained-by").exists()
    assert "gpu_resets" not in state.load(node.sim)
    assert not LOCK.exists()


def test_replace_hardware_records_the_mark_and_resets_nothing(node: Node) -> None:
    done = node.play("guardian_act.yml", actions("gpu_reset", replace_hardware=True))
    assert done.returncode == 0, done.stdout + done.stderr
    assert [(e["action"], e["outcome"]) for e in node.events()] == [
        ("quarantine", "ok"),
        ("replace_hardware", "ok"),
    ]
    assert "gpu_resets" not in state.load(node.sim)
    assert node.record.exists()


def test_a_refused_reset_leaves_the_node_drained_and_records_the_failure(node: Node) -> None:
    config = vllm_engine.Config("m", "m", 1, 4096, 8, 8192, 0.9, True, 0.0)
    vllm_engine.Engine(node.sim, config, [str(node.gpus()[3]["uuid"])]).claim_memory()
    done = node.play("guardian_act.yml", actions("gpu_reset"))
    assert done.returncode != 0
    assert "GPU reset failed: GPU reset refused, nothing reset: 1 GPU(s) in use by a process" in done.stdout
    quarantine, reset = node.events()
    assert quarantine["action"] == "quarantine"
    assert (reset["action"], reset["outcome"]) == ("gpu_reset", "failed")
    assert reset["detail"].startswith("GPU reset refused, nothing reset")
    assert node.record.exists()  # stays drained
    assert "gpu_resets" not in state.load(node.sim)
    assert not LOCK.exists()


def test_the_record_playbook_appends_the_gates_verdict(node: Node) -> None:
    verdict = {
        "class": "row_remap",
        "action": "gate_passed",
        "outcome": "ok",
        "checks": [],
        "detail": "gate passed",
    }
    done = node.play("guardian_record.yml", {"guardian_events": {"node-a": [verdict]}})
    assert done.returncode == 0, done.stdout + done.stderr
    [event] = node.events()
    assert {k: event[k] for k in verdict} == verdict and event["run"] == f"test-guardian-{os.getpid()}"
    assert not LOCK.exists()
