"""A playbook that holds its nodes runs as this process's holder, and the nodes it still holds when it
ends (it failed on them, or a second signal stopped it) are released by release_lock.yml."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpufleet import runner

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
