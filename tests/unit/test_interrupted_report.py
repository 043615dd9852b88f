"""A run a signal reached says so in its report: one signal that the run absorbed (it finished the work
under way) is written into report.json, .md, .html and .prom; after a second, each host the run had
reached is interrupted, at the task it was on, and a node it had drained names the drain task, from
the gate and from drift --fix alike."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from gpufleet import cli, commands, drift, events, interrupt, report_files, runner
from gpufleet import report as report_mod
from gpufleet.commands import gate as gate_command
from gpufleet.report import HostReport, Report

DRAIN = "gpufleet.node.drain : Drain the node in Slurm"
RECORD = "gpufleet.node.drain : Record on the node that gpufleet took it out of service"
LEAF_PLAY = "Read each leaf switch once (its side of every RoCE link)"


def _event(
    host: str, task: str, changed: bool = False, play: str = "Fix", path: str = "", kind: str = "runner_on_ok"
) -> dict[str, Any]:
    """A task result as ansible-runner sends it (the role's task named '<role FQCN> : <task>'); with
    ``kind`` runner_on_start, the task beginning on the host."""
    role, _, name = task.rpartition(" : ")
    data: dict[str, Any] = {"host": host, "task": name, "play": play}
    if kind != "runner_on_start":
        data["res"] = {"changed": changed}
    if role:
        data["resolved_role"] = role
    if path:
        data["task_path"] = path
    return {"event": kind, "event_data": data}


def _ran(host: str, task: str, **kwargs: Any) -> list[dict[str, Any]]:
    """A task begun and finished on the host, as every task is."""
    return [
        _event(host, task, kind="runner_on_start", play=kwargs.get("play", "Fix")),
        _event(host, task, **kwargs),
    ]


READ = "gpufleet.node.switch_qos : Read the leaf's lossless RoCE settings"
VERIFY = "gpufleet.node.rdma_qos : Verify the QoS profile"


def _stopped_hosts() -> dict[str, events.HostResult]:
    """What the events of a run stopped by a second signal told: node01 recorded and drained (Slurm),
    applied its QoS and was verifying it; node02 was judged and waited for its next task; node03 had
    finished no task; leaf01 had been read (its part was done: 'Name this run' and the rest of the
    nodes' tasks are not its); leaf02's read was under way."""
    collector = events.Collector()
    for event in [
        *_ran("leaf01", READ, play=LEAF_PLAY),
        _event("leaf02", READ, play=LEAF_PLAY, kind="runner_on_start"),
        *_ran("node01", "Name this run"),
        *_ran("node01", "Judge the node before it is drained"),
        *_ran("node01", RECORD, changed=True, path="/x/roles/drain/tasks/drain.yml:15"),
        *_ran("node01", DRAIN, changed=True, path="/x/roles/drain/tasks/drain.yml:23"),
        *_ran("node01", "gpufleet.node.rdma_qos : Apply the QoS profile", changed=True),
        _event("node01", VERIFY, kind="runner_on_start"),
        *_ran("node02", "Judge the node before it is drained"),
    ]:
        collector.add(event)
    return collector.hosts


def test_the_gate_report_names_where_each_host_stood_and_the_drain_task(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    hosts = _stopped_hosts()

    def stopped(options: runner.RunOptions, progress: object = None) -> runner.RunResult:
        raise runner.Canceled("post_maintenance.yml was stopped by SIGINT before it ended", hosts)

    monkeypatch.setattr(runner, "run_playbook", stopped)
    report = Report(command="gate", started="t0")
    options = runner.RunOptions(playbook="post_maintenance.yml", inventory=tmp_path / "inventory.yml")
    with pytest.raises(runner.Canceled) as stopped:
        commands.run_reported(report, options, None)
    # the report goes on with the stop, to be written as every report is (the CLI writes it)
    assert isinstance(stopped.value, commands.CanceledRun) and stopped.value.report is report
    report_files.write(report, tmp_path)
    written = json.loads((tmp_path / "report.json").read_text())["hosts"]
    assert {n: h["status"] for n, h in written.items()} == dict.fromkeys(sorted(hosts), "interrupted")
    assert written["node01"]["message"] == (
        f"post_maintenance.yml was stopped by SIGINT before it ended: stopped in '{VERIFY}', under way; "
        f"left drained by '{DRAIN}'"
    )
    assert written["node02"]["message"].endswith(
        "no task of it was under way (the last it finished: 'Judge the node before it is drained'); "
        "no drain task of it had finished: in service unless the drain was under way"
    )
    # a leaf is read, never drained: its read done, no task named; or the read it was in
    assert written["leaf01"]["message"].endswith(
        "its part of the run (the leaf's read) had finished: no task of it was under way"
    )
    assert written["leaf02"]["message"].endswith(f"stopped in '{READ}', under way")


def test_an_undrain_is_not_taken_for_the_drain() -> None:
    collector = events.Collector()
    collector.add(_event("node01", DRAIN, changed=True, path="/x/roles/drain/tasks/drain.yml:23"))
    undrain = "gpufleet.node.drain : Resume the node in Slurm"
    collector.add(_event("node01", undrain, changed=True, path="/x/roles/drain/tasks/undrain.yml:5"))
    assert collector.hosts["node01"].drain_task() == DRAIN
    only = events.Collector()
    only.add(_event("node01", undrain, changed=True, path="/x/roles/drain/tasks/undrain.yml:5"))
    assert only.hosts["node01"].drain_task() is None and not only.hosts["node01"].drained()


def test_an_interrupted_drift_fix_batch_names_the_drain_task_from_its_events(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The second signal stops batch 1 (node01, node02, node03); node04's batch never starts."""
    hosts = _stopped_hosts()

    def run(options: runner.RunOptions, progress: Any = None) -> runner.RunResult:
        assert options.playbook == "drift_fix.yml"
        raise runner.Canceled("drift_fix.yml was stopped by SIGTERM before it ended", hosts)

    monkeypatch.setattr(runner, "run_playbook", run)
    change = {"setting": "rdma_qos.pfc[ens21np0]", "from": [], "to": [3]}
    report = Report(command="drift", started="t0")
    for name in ("node01", "node02", "node03", "node04"):
        report.hosts[name] = HostReport(status="drifted", changes=[change])
    options = drift.DriftOptions(tmp_path / "hosts.yml", None, tmp_path / "report", batch="3")
    fixed = drift.fix(options, report)
    messages = {name: host.message for name, host in fixed.hosts.items()}
    assert {host.status for host in fixed.hosts.values()} == {"interrupted"}
    assert messages["node01"] == (
        f"batch 1: drift_fix.yml was stopped by SIGTERM before it ended: stopped in '{VERIFY}', under way; "
        f"left drained by '{DRAIN}'; it may be "
        "half-provisioned: run gpufleet drift to see where it stands, then drift --fix again"
    )
    assert "no drain task of it had finished: in service unless the drain was under way" in messages["node02"]
    assert "no task of it had finished: it may be drained if the drain was under way" in messages["node03"]
    assert messages["node04"].startswith("not started: gpufleet was stopped during batch 1")


def test_one_signal_a_run_absorbed_is_in_every_report_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """One SIGTERM during a gate: the gate finishes (its nodes pass, exit 0 stays right), and the report
    the CLI writes says it was asked to stop and what was done about it."""

    def gate_run(options: runner.RunOptions, progress: object = None) -> runner.RunResult:
        os.kill(os.getpid(), signal.SIGTERM)
        passed = events.HostResult.from_tasks("node01", [{"task": "Gate", "outcome": "ok", "changed": True}])
        return runner.RunResult(rc=0, status="successful", hosts={"node01": passed})

    monkeypatch.setattr(runner, "run_playbook", gate_run)
    report_dir = tmp_path / "gate"
    with interrupt.installed() as asked:
        report = gate_command.gate(commands.CommonOptions(tmp_path / "hosts.yml", None, report_dir))
        cli._write(report, report_dir, asked)
    said = "asked to stop by SIGTERM: the work under way was finished and nothing new was started"
    assert report.all_ok() and report.hosts["node01"].status == "ok"
    assert json.loads((report_dir / "report.json").read_text())["interrupted"] == said
    assert f"**Interrupted:** {said}" in (report_dir / "report.md").read_text()
    assert f"<strong>Interrupted:</strong> {said}" in (report_dir / "report.html").read_text()
    assert 'gpufleet_last_run_interrupted{command="gate"} 1' in (report_dir / "gpufleet.prom").read_text()
    # another run's state (no signal): its report says none
    calm = Report(command="gate", started="t0")
    cli._write(calm, tmp_path / "calm", interrupt.Interrupt())
    assert "interrupted" not in json.loads((tmp_path / "calm" / "report.json").read_text())
    assert (
        'gpufleet_last_run_interrupted{command="gate"} 0' in (tmp_path / "calm" / "gpufleet.prom").read_text()
    )


def test_a_report_read_back_keeps_what_was_asked(tmp_path: Path) -> None:
    """`gpufleet report` renders report.json again: the interruption is kept, and checked."""
    written = Report(command="gate", started="t0", finished="t1", interrupted="asked to stop by SIGINT: x")
    report_files.write(written, tmp_path)
    again = report_mod.load(tmp_path / "report.json")
    assert again.interrupted == "asked to stop by SIGINT: x"
    data = json.loads((tmp_path / "report.json").read_text())
    data["interrupted"] = ["not", "text"]
    (tmp_path / "report.json").write_text(json.dumps(data))
    with pytest.raises(report_mod.ReportError, match="interrupted: not a string"):
        report_mod.load(tmp_path / "report.json")
