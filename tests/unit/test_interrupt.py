"""SIGINT/SIGTERM during `drift --fix`: the first finishes the batch under way and starts no other,
a second stops the playbook now; the report names every node's state and the exit status is 1.
The signals are real (sent to this process while cli.main runs); the playbook runs are faked."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from gpufleet import cli, runner


def _drifted(name: str) -> runner.HostResult:
    change = {"setting": "rdma_qos.pfc[ens21np0]", "from": [], "to": [3]}
    host = runner.HostResult(name=name, changes=[change])
    host.tasks = [{"task": "Read the node", "outcome": "ok", "changes": [change]}]
    return host


def _fixed(name: str) -> runner.HostResult:
    return runner.HostResult(name=name, changed=1, tasks=[{"task": "x", "outcome": "ok", "changed": True}])


@pytest.fixture
def fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUFLEET_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("ANSIBLE_VAULT_PASSWORD_FILE", raising=False)
    inventory = tmp_path / "hosts.yml"
    hosts = "".join(f"    node0{i}: {{ansible_host: 10.0.0.{i}}}\n" for i in range(1, 5))
    inventory.write_text(
        "all:\n  children:\n    gpu_nodes:\n      hosts:\n" + hosts.replace("    ", "        ")
    )
    return inventory


def _fake_runs(monkeypatch: pytest.MonkeyPatch, during_batch: list[int], signals: int = 1) -> list[str]:
    """drift.yml finds node01..04 drifted; a drift_fix.yml batch whose number is in ``during_batch``
    gets ``signals`` SIGINTs while it runs (after a second, ansible-runner's cancel callback is true
    and the run ends canceled)."""
    batches: list[str] = []

    def run(options: runner.RunOptions, progress: Any = None) -> runner.RunResult:
        if options.playbook == "drift.yml":
            hosts = {f"node0{i}": _drifted(f"node0{i}") for i in range(1, 5)}
            return runner.RunResult(rc=2, status="failed", hosts=hosts)
        batches.append(str(options.limit))
        if len(batches) in during_batch:
            for _ in range(signals):
                os.kill(os.getpid(), signal.SIGINT)
        if options.interrupt is not None and options.interrupt.stop_now():
            raise runner.Canceled("drift_fix.yml was stopped by SIGINT before it ended")
        names = str(options.limit).split(",")
        return runner.RunResult(rc=0, status="successful", hosts={n: _fixed(n) for n in names})

    monkeypatch.setattr(runner, "run_playbook", run)
    return batches


def _fix(inventory: Path, report_dir: Path) -> tuple[int, dict[str, Any]]:
    argv = ["drift", "--fix", "--batch", "2", "--inventory", str(inventory), "--report-dir", str(report_dir)]
    code = cli.main(argv)
    return code, json.loads((report_dir / "report.json").read_text())


def test_one_signal_finishes_the_batch_and_starts_no_other(
    fleet: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    batches = _fake_runs(monkeypatch, during_batch=[1])
    previous = signal.getsignal(signal.SIGINT)
    code, report = _fix(fleet, tmp_path / "report")
    assert code == cli.EXIT_NOT_OK
    assert batches == ["node01,node02"]
    hosts = report["hosts"]
    assert [hosts[n]["status"] for n in ("node01", "node02")] == ["changed", "changed"]
    for name in ("node03", "node04"):
        assert hosts[name]["status"] == "interrupted"
        assert hosts[name]["message"] == (
            "not started: gpufleet was interrupted (SIGINT); still drifted, left in service"
        )
    assert report["summary"]["interrupted"] == 2
    assert signal.getsignal(signal.SIGINT) is previous  # handlers restored after the run


def test_a_second_signal_stops_the_batch_and_says_its_nodes_may_be_drained(
    fleet: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    batches = _fake_runs(monkeypatch, during_batch=[1], signals=2)
    code, report = _fix(fleet, tmp_path / "report")
    assert code == cli.EXIT_NOT_OK
    assert batches == ["node01,node02"]
    hosts = report["hosts"]
    for name in ("node01", "node02"):
        assert hosts[name]["status"] == "interrupted"
        # no task result of it came before the stop: the report cannot rule the drain out
        assert (
            "no task of it had finished: it may be drained if the drain was under way"
            in hosts[name]["message"]
        )
        assert "it may be half-provisioned" in hosts[name]["message"]
        assert "run gpufleet drift" in hosts[name]["message"]
    for name in ("node03", "node04"):
        assert hosts[name]["status"] == "interrupted"
        assert hosts[name]["message"].startswith("not started: gpufleet was stopped during batch 1")


def test_no_module_keeps_the_runs_interrupt_state(
    fleet: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Interrupt travels with the run's options (issue 37: no module-level state the CLI sets):
    after a signalled run no gpufleet module holds one."""
    import importlib
    import pkgutil

    import gpufleet
    from gpufleet.interrupt import Interrupt

    _fake_runs(monkeypatch, during_batch=[1])
    _fix(fleet, tmp_path / "report")
    held = []
    for info in pkgutil.walk_packages(gpufleet.__path__, "gpufleet."):
        module = importlib.import_module(info.name)
        held += [f"{info.name}.{n}" for n, v in vars(module).items() if isinstance(v, Interrupt)]
    assert held == []
