"""A run stopped by a second signal still writes its report: each host it had reached is interrupted,
at the task it was on, and a node it had drained says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpufleet import commands, runner
from gpufleet.report import Report


def test_the_report_names_where_each_host_stood(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    drained = [
        {"task": "gpufleet.node.drain : Drain the node in Slurm", "outcome": "ok", "changed": True},
        {
            "task": "gpufleet.node.thermal_gate : Burn in under small-batch load",
            "outcome": "ok",
            "changed": False,
        },
    ]
    hosts = {
        "node01": runner.HostResult.from_tasks("node01", drained),
        "node02": runner.HostResult.from_tasks("node02", drained[1:]),
    }

    def stopped(options: runner.RunOptions, progress: object = None) -> runner.RunResult:
        raise runner.Canceled("post_maintenance.yml was stopped by SIGINT before it ended", hosts)

    monkeypatch.setattr(runner, "run_playbook", stopped)
    report = Report(command="gate", started="t0")
    options = runner.RunOptions(playbook="post_maintenance.yml", inventory=tmp_path / "inventory.yml")
    with pytest.raises(runner.Canceled):
        commands.run_reported(report, options, tmp_path)
    written = json.loads((tmp_path / "report.json").read_text())["hosts"]
    assert {n: h["status"] for n, h in written.items()} == {"node01": "interrupted", "node02": "interrupted"}
    assert written["node01"]["message"].endswith(
        "stopped at 'gpufleet.node.thermal_gate : Burn in under small-batch load'; left drained"
    )
    assert "left drained" not in written["node02"]["message"]
