"""A playbook that holds its nodes runs as this process's holder, and the nodes it still holds when it
ends (it failed on them, or a second signal stopped it) are released by release_lock.yml."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gpufleet import cli, runner

HOLD = {"task": runner.HOLD_TASK, "outcome": "ok", "play": "p"}
RELEASE = {"task": runner.RELEASE_TASK, "outcome": "ok", "play": "p"}
FAILED = {"task": "gpufleet.node.gpu_power : Apply", "outcome": "failed", "play": "p"}


def test_the_nodes_a_run_failed_on_are_released(monkeypatch: pytest.MonkeyPatch) -> None:
    runs: list[runner.RunOptions] = []

    def fake(options: runner.RunOptions, progress: runner.Progress | None = None) -> runner.RunResult:
        runs.append(options)
        hosts = {
            "node01": runner.HostResult.from_tasks("node01", [HOLD, RELEASE]),
            "node02": runner.HostResult.from_tasks("node02", [HOLD, FAILED]),
            "node03": runner.HostResult.from_tasks("node03", [FAILED]),  # refused before it held
        }
        return runner.RunResult(rc=2, status="failed", hosts=hosts)

    monkeypatch.setattr(runner, "_run", fake)
    options = runner.RunOptions(playbook="drift_fix.yml", inventory=Path("inv"), break_lock=True)
    runner.run_playbook(options)
    first, release = runs
    holder = first.extravars["gpufleet_run"]
    assert holder["command"] == "gpufleet drift --fix" and holder["pid"] == os.getpid()
    assert first.extravars["gpufleet_break_lock"] is True
    assert (release.playbook, release.limit, release.break_lock) == ("release_lock.yml", "node02", False)
    assert release.extravars["gpufleet_run"]["id"] == holder["id"]


def test_a_read_only_run_holds_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    runs: list[runner.RunOptions] = []

    def fake(options: runner.RunOptions, progress: runner.Progress | None = None) -> runner.RunResult:
        runs.append(options)
        return runner.RunResult(rc=0, status="successful", hosts={})

    monkeypatch.setattr(runner, "_run", fake)
    runner.run_playbook(runner.RunOptions(playbook="drift.yml", inventory=Path("inv")))
    runner.run_playbook(runner.RunOptions(playbook="provision.yml", inventory=Path("inv"), check=True))
    assert [r.extravars for r in runs] == [{}, {}]


def test_a_node_lock_refusal_is_exit_2_as_the_controller_lock_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One rule: refused before anything changed is 2, whichever lock refused (the controller's:
    test_runlock); the node that another run holds is named with that run, the other changed."""
    monkeypatch.setenv("GPUFLEET_STATE_DIR", str(tmp_path / "state"))
    refused = {
        "task": runner.HOLD_TASK,
        "outcome": "failed",
        "play": "Judge every role on the node before anything changes",
        "input_error": True,
        "msg": "the node is held by gpufleet gate by bob on laptop2 (pid 7, started t0): another run ...",
    }
    changed = {"task": "gpufleet.node.gpu_power : Apply", "outcome": "ok", "changed": True, "play": "p"}

    def fake(options: runner.RunOptions, progress: runner.Progress | None = None) -> runner.RunResult:
        hosts = {
            "node01": runner.HostResult.from_tasks("node01", [HOLD, changed, RELEASE]),
            "node02": runner.HostResult.from_tasks("node02", [refused]),
        }
        return runner.RunResult(rc=2, status="failed", hosts=hosts)

    monkeypatch.setattr(runner, "_run", fake)
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        "all:\n  children:\n    gpu_nodes:\n      hosts:\n"
        "        node01: {ansible_host: 10.0.0.1}\n        node02: {ansible_host: 10.0.0.2}\n"
    )
    argv = ["provision", "--inventory", str(inventory), "--report-dir", str(tmp_path / "r")]
    assert cli.main(argv) == 2
    report = json.loads((tmp_path / "r" / "report.json").read_text())["hosts"]
    assert report["node02"]["configuration_error"] is True and report["node02"]["status"] == "failed"
    assert "held by gpufleet gate by bob on laptop2" in report["node02"]["message"]
    assert report["node01"]["status"] == "changed"
