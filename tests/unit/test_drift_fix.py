"""What drift --fix rolls out to (src/gpufleet/drift.py fix): drifted nodes and nodes a run left
drained; never a leaf (gpufleet switch changes it) nor a node drift already refused, each named."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpufleet import catalog, drift, runlock, runner
from gpufleet.report import HostReport, Report

PFC = {"setting": "rdma_qos.pfc[ens21np0]", "from": [], "to": [3]}
LEFT = {
    "name": "drain.left_drained",
    "ok": False,
    "value": "slurm: gpufleet drift --fix",
    "limit": "in service",
}
ECN = {"name": "fabric.switch_ecn[node03:mlx5_0 -> leaf01:swp3]", "ok": False, "value": "off", "limit": "on"}
LEAF_READ = {
    "task": "gpufleet.node.switch_qos : Read",
    "outcome": "ok",
    "play": catalog.LEAF_READ_PLAY + " (x)",
}


def compared() -> tuple[Report, runner.RunResult]:
    report = Report(command="drift", started="t0")
    report.hosts = {
        "leaf01": HostReport(status="drifted", changes=[{"setting": "switch_qos.ecn", "from": 0, "to": 1}]),
        "node01": HostReport(status="drifted", changes=[PFC]),
        "node02": HostReport(status="failed", checks=[LEFT]),
        "node03": HostReport(status="failed", changes=[PFC], checks=[ECN]),
        "node04": HostReport(
            status="failed", changes=[PFC], configuration_error=True, message="gpu_power: 1500"
        ),
        "node05": HostReport(status="ok"),
    }
    hosts = {name: runner.HostResult(name=name) for name in report.hosts}
    hosts["leaf01"].tasks = [LEAF_READ]
    return report, runner.RunResult(rc=2, status="failed", hosts=hosts)


def test_the_rollout_takes_drifted_and_left_drained_nodes_only(monkeypatch: pytest.MonkeyPatch) -> None:
    limits: list[str | None] = []

    def run(options: runner.RunOptions, progress: runner.Progress | None = None) -> runner.RunResult:
        limits.append(options.limit)
        names = (options.limit or "").split(",")
        return runner.RunResult(
            rc=0, status="successful", hosts={n: runner.HostResult(name=n) for n in names}
        )

    monkeypatch.setattr(runner, "run_playbook", run)
    report, result = compared()
    options = drift.DriftOptions(inventory=Path("inv"), limit=None, report_dir=Path("r"), fix=True, batch="1")
    fixed = drift.fix(options, report, None, result)
    assert limits == ["node01", "node02"]
    hosts: dict[str, Any] = fixed.hosts
    assert (hosts["node01"].status, hosts["node01"].message) == ("changed", "fixed in batch 1")
    assert hosts["node02"].status == "changed"
    assert hosts["node02"].message.startswith("returned to service in batch 2")
    assert hosts["leaf01"].status == "drifted"
    assert hosts["leaf01"].message.startswith("not changed: drift --fix changes nodes only; gpufleet switch")
    assert hosts["node03"].message.startswith(
        "not fixed, left out of the rollout: its fabric fails fabric.switch_ecn"
    )
    assert hosts["node04"].message == "not fixed, left out of the rollout: gpu_power: 1500"
    assert hosts["node04"].configuration_error is True
    assert hosts["node05"].status == "ok"


def test_a_node_refused_by_its_batchs_judgement_was_not_drained() -> None:
    refused = {
        "task": "Hold the node for this run",
        "outcome": "failed",
        "play": drift.JUDGE_PLAY,
        "msg": "this node is held by gpufleet gate by bob on awx (pid 7, started t)",
    }
    result = runner.HostResult(name="node01", failed=True, tasks=[refused])
    host = drift._fixed_host(HostReport(status="drifted", changes=[PFC]), result, 3)
    assert host.status == "failed"
    assert host.message == (
        "batch 3: refused before the drain, left as it was: Hold the node for this run: "
        "this node is held by gpufleet gate by bob on awx (pid 7, started t)"
    )


@pytest.mark.parametrize("content", ["[]", '{"pid": "x"}', '{"pid": 1, "hosts": [], "command": 1}', "{"])
def test_a_local_record_of_the_wrong_shape_holds_nothing(
    tmp_path: Path, content: str, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "123.json").write_text(content)
    with runlock.hold("gpufleet provision", {"10.0.0.1": "node01"}, tmp_path):
        assert not (runs / "123.json").exists()
    assert f"removed {runs / '123.json'}: not a run lock record" in capsys.readouterr().err
