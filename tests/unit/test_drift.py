"""The pure parts of `gpufleet drift`: batch sizes, the failure limit, the drift Markdown."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufleet import drift, runner
from gpufleet.markdown_report import render as render_markdown
from gpufleet.report import HostReport, Report


@pytest.mark.parametrize(
    ("spec", "total", "size"),
    [("10%", 32, 4), ("10%", 3, 1), ("100%", 7, 7), ("50%", 5, 3), ("1", 9, 1), ("4", 2, 4)],
)
def test_batch_size(spec: str, total: int, size: int) -> None:
    assert drift.batch_size(spec, total) == size


@pytest.mark.parametrize("spec", ["0", "-1", "0%", "120%", "ten", ""])
def test_bad_batch_is_a_usage_error(spec: str) -> None:
    with pytest.raises(ValueError, match="--batch"):
        drift.batch_size(spec, 10)


def test_batches_keep_order() -> None:
    assert drift.batches(["a", "b", "c", "d", "e"], 2) == [["a", "b"], ["c", "d"], ["e"]]


@pytest.mark.parametrize(
    ("failed", "batch", "limit", "stop"),
    [(0, 1, 0, False), (1, 1, 0, True), (1, 4, 25, False), (2, 4, 25, True), (1, 10, 10, False)],
)
def test_over_limit(failed: int, batch: int, limit: float, stop: bool) -> None:
    assert drift.over_limit(failed, batch, limit) is stop


def test_drift_markdown_counts_settings_per_node() -> None:
    pfc = {"setting": "rdma_qos.pfc[ens21np0]", "from": [], "to": [3]}
    topo = {"setting": "nccl_topology.file", "from": "sha256:aa", "to": "sha256:bb"}
    report = Report(command="drift", started="t0", finished="t1")
    report.hosts = {
        "node01": HostReport(status="drifted", changes=[pfc, topo]),
        "node02": HostReport(status="drifted", changes=[pfc]),
        "node03": HostReport(status="ok"),
    }
    text = render_markdown(report)
    assert "| rdma_qos.pfc[ens21np0] | 2 nodes |" in text
    assert "| nccl_topology.file | 1 node |" in text
    assert "| node | rdma_qos.pfc[ens21np0] | nccl_topology.file |" in text
    assert "| node01 | [] → [3] | sha256:aa → sha256:bb |" in text
    assert "| node02 | [] → [3] |  |" in text
    assert "node03 |" not in text.split("## Node x setting")[1]


def test_other_commands_keep_their_markdown() -> None:
    report = Report(command="provision", started="t0", finished="t1", hosts={"n": HostReport()})
    assert "Drifted settings" not in render_markdown(report)


def _failed_run(*tasks: dict[str, object]) -> runner.HostResult:
    failed = {"task": "gpufleet.node.rdma_qos : Apply", "outcome": "failed", "msg": "mlnx_qos failed"}
    return runner.HostResult(name="node01", failed=True, tasks=[*tasks, failed])


def test_a_failed_fix_says_left_drained_only_when_the_drain_role_drained_it() -> None:
    drain = {"task": "gpufleet.node.drain : Drain the node (Slurm)", "outcome": "ok", "changed": True}
    refused = {"task": "gpufleet.node.drain : Check the drain inputs", "outcome": "ok", "changed": False}
    before = HostReport(status="drifted")
    drained = drift._fixed_host(before, _failed_run(drain), 2)
    assert drained.message == "batch 2: gpufleet.node.rdma_qos : Apply: mlnx_qos failed; left drained"
    never = drift._fixed_host(before, _failed_run(refused), 1)
    assert (
        never.status == "failed"
        and never.message == "batch 1: gpufleet.node.rdma_qos : Apply: mlnx_qos failed"
    )


def test_drift_reports_progress_through_the_commands_display(monkeypatch: pytest.MonkeyPatch) -> None:
    """The read-only drift run hands its display to the runner, like the other commands."""
    given: list[object] = []

    def fake_run(options: runner.RunOptions, progress: runner.Progress | None = None) -> runner.RunResult:
        given.append(progress)
        return runner.RunResult(rc=0, status="successful", hosts={})

    monkeypatch.setattr(runner, "run_playbook", fake_run)
    display = runner.Progress()
    options = drift.DriftOptions(inventory=Path("inv"), limit=None, report_dir=Path("r"))
    drift.check(options, display)
    assert given == [display]
