"""gpufleet.guardian, the watch that acts, with the watch and the playbooks it runs stood in for: --check
runs nothing after the watch and saves no breaker; a quarantine is counted before the act playbook runs;
a remediated node is gated and returned, or kept out and escalated on the second failure; a node the act
playbook finds already out is left alone; a first signal starts no gate; each step carries its times."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpufleet import checks, guardian, guardian_breaker, runner
from gpufleet.commands import gate as gate_cmd
from gpufleet.interrupt import Interrupt
from gpufleet.report import HostReport, Report

XID = "health.xid[0000:1b:00.0]"
HISTORY_ROW_REMAP = [
    {"time": "2026-12-06T10:00:00Z", "class": "row_remap", "action": "quarantine", "outcome": "ok"},
    {"time": "2026-12-06T10:01:00Z", "class": "row_remap", "action": "gpu_reset", "outcome": "ok"},
]


def failed(name: str, value: Any = 1) -> dict[str, Any]:
    return checks.check(name, False, value, 0, "", f"{name} failed")


def watched(hosts: dict[str, list[dict[str, Any]]], history: dict[str, list[Any]] | None = None) -> Report:
    report = Report(command="watch", started="2026-12-06T20:00:00Z")
    for name, found in hosts.items():
        reading = {"history": (history or {}).get(name, []), "drain_record": None}
        report.hosts[name] = HostReport(
            status="failed" if found else "ok", checks=found, facts={"gpufleet_watch": reading}
        )
    return report


class Fleet:
    """The watch's report and every playbook run, recorded; each playbook's host results given."""

    def __init__(self, report: Report, results: dict[str, dict[str, runner.HostResult]]) -> None:
        self.report, self.results = report, results
        self.runs: list[runner.RunOptions] = []
        self.gated: list[str] = []
        self.gate_status = "ok"

    def watch(self, options: Any, progress: Any = None) -> Report:
        return self.report

    def run_playbook(self, options: runner.RunOptions, progress: Any = None) -> runner.RunResult:
        self.runs.append(options)
        hosts = self.results.get(options.playbook, {})
        return runner.RunResult(0, "successful", {n: hosts.get(n, runner.HostResult(name=n)) for n in hosts})

    def gate(self, options: Any, burn_in: Any, progress: Any = None) -> Report:
        self.gated.append(options.limit)
        report = Report(command="gate", started="")
        for name in options.limit.split(","):
            gate_checks = [] if self.gate_status == "ok" else [failed("health.row_remap_pending[GPU-a]")]
            report.hosts[name] = HostReport(status=self.gate_status, checks=gate_checks, message="gate said")
        return report


def task(name: str, outcome: str = "ok", **extra: Any) -> dict[str, Any]:
    return {
        "task": f"{name}",
        "outcome": outcome,
        "start": "2026-12-06T20:31:05.123456+00:00",
        "end": "2026-12-06T20:31:09.5+00:00",
        **extra,
    }


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUFLEET_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def options(tmp_path: Path, hostvars: dict[str, Any], **extra: Any) -> guardian.GuardianOptions:
    listing = {"_meta": {"hostvars": hostvars}}
    return guardian.GuardianOptions(tmp_path / "inv.yml", None, tmp_path / "report", listing=listing, **extra)


def install(monkeypatch: pytest.MonkeyPatch, fleet: Fleet) -> None:
    monkeypatch.setattr(guardian.watch_mod, "watch", fleet.watch)
    monkeypatch.setattr(guardian.runner, "run_playbook", fleet.run_playbook)
    monkeypatch.setattr(gate_cmd, "gate", fleet.gate)


def test_check_runs_nothing_after_the_watch_and_keeps_no_count(
    tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = Fleet(watched({"node01": [failed("health.gpu_count", 7)], "node02": []}), {})
    install(monkeypatch, fleet)
    hostvars = {"node01": {"guardian_remediation": {"gpu_lost": "reboot"}}, "node02": {}}
    report = guardian.guard(options(tmp_path, hostvars, check=True))
    assert fleet.runs == [] and fleet.gated == []
    assert not guardian_breaker.path().exists()
    found = report.hosts["node01"].guardian
    assert found["decision"] == "would_quarantine" and found["remediation"] == "reboot", found
    assert [s["outcome"] for s in found["steps"]] == ["would"]
    assert report.hosts["node02"].guardian == {}
    assert report.guardian["check"] is True and report.command == "watch --act"


def test_a_bad_setting_stops_the_run_before_the_watch(
    tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = Fleet(watched({"node01": []}), {})
    install(monkeypatch, fleet)
    with pytest.raises(guardian.guardian_settings.SettingsError, match="guardian_escalate_after"):
        guardian.guard(options(tmp_path, {"node01": {"guardian_escalate_after": 99}}))
    assert fleet.runs == []


def test_a_remediated_node_that_passes_the_gate_is_returned_with_each_step_timed(
    tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    acted = runner.HostResult.from_tasks(
        "node01",
        [
            task("Quarantine: drain the node"),
            task("Quarantine: stop the instances"),
            task("GPU reset: reset"),
        ],
    )
    fleet = Fleet(
        watched({"node01": [failed("health.row_remap_pending[GPU-a]")]}),
        {guardian.ACT_PLAYBOOK: {"node01": acted}, guardian.RECORD_PLAYBOOK: {}},
    )
    install(monkeypatch, fleet)
    hostvars = {"node01": {"guardian_remediation": {"row_remap": "gpu_reset"}}}
    report = guardian.guard(options(tmp_path, hostvars, burn_in_seconds=5))
    act = fleet.runs[0]
    assert act.playbook == guardian.ACT_PLAYBOOK and act.limit == "node01"
    given = act.extravars["guardian_actions"]["node01"]
    assert given["remediation"] == "gpu_reset" and given["reason"].startswith("gpufleet watch")
    # counted before the act ran
    assert [e["node"] for e in json.loads(guardian_breaker.path().read_text())["events"]] == ["node01"]
    assert fleet.gated == ["node01"]
    found = report.hosts["node01"].guardian
    assert found["decision"] == "returned" and report.hosts["node01"].status == "changed"
    assert [s["step"] for s in found["steps"]] == ["quarantine", "gpu_reset", "gate", "return"]
    assert found["steps"][0]["started"] == "2026-12-06T20:31:05Z"
    assert found["steps"][0]["finished"] == "2026-12-06T20:31:09Z"
    recorded = fleet.runs[-1]
    assert recorded.playbook == guardian.RECORD_PLAYBOOK
    assert [e["action"] for e in recorded.extravars["guardian_events"]["node01"]] == ["gate_passed"]


def test_a_second_reset_whose_gate_fails_is_replace_hardware(
    tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    acted = runner.HostResult.from_tasks("node01", [task("Quarantine: drain"), task("GPU reset: reset")])
    fleet = Fleet(
        watched({"node01": [failed("health.row_remap_pending[GPU-a]")]}, {"node01": HISTORY_ROW_REMAP}),
        {guardian.ACT_PLAYBOOK: {"node01": acted}},
    )
    fleet.gate_status = "blocked"
    install(monkeypatch, fleet)
    hostvars = {"node01": {"guardian_remediation": {"row_remap": "gpu_reset"}}}
    report = guardian.guard(options(tmp_path, hostvars))
    found = report.hosts["node01"].guardian
    assert found["decision"] == "replace_hardware", found
    assert ("gate", "failed") in [(s["step"], s["outcome"]) for s in found["steps"]]
    events = fleet.runs[-1].extravars["guardian_events"]["node01"]
    assert [e["action"] for e in events] == ["gate_failed", "replace_hardware"]
    assert "2 remediations of row_remap" in events[1]["detail"]


def test_a_node_found_already_out_is_left_alone(
    tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = checks.check(guardian.ALREADY_OUT, False, "RMA 1234", "in service", "", "drained by a person")
    acted = runner.HostResult.from_tasks("node01", [task("Quarantine: check", "failed", checks=[out])])
    fleet = Fleet(watched({"node01": [failed(XID, 79)]}), {guardian.ACT_PLAYBOOK: {"node01": acted}})
    install(monkeypatch, fleet)
    report = guardian.guard(options(tmp_path, {"node01": {"guardian_remediation": {"xid": "gpu_reset"}}}))
    assert report.hosts["node01"].guardian["decision"] == "left_alone"
    assert fleet.gated == []
    # counted before the act, taken back once the act found it out: the breaker's place is not used
    assert json.loads(guardian_breaker.path().read_text())["events"] == []


def test_a_signal_during_the_act_starts_no_gate(
    tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = Interrupt()
    acted = runner.HostResult.from_tasks("node01", [task("Quarantine: drain"), task("Reboot: restart")])
    fleet = Fleet(
        watched({"node01": [failed("health.gpu_count", 7)]}), {guardian.ACT_PLAYBOOK: {"node01": acted}}
    )
    real = fleet.run_playbook

    def signalled(run: runner.RunOptions, progress: Any = None) -> runner.RunResult:
        asked.handle(15)
        return real(run, progress)

    monkeypatch.setattr(fleet, "run_playbook", signalled)
    install(monkeypatch, fleet)
    hostvars = {"node01": {"guardian_remediation": {"gpu_lost": "reboot"}}}
    report = guardian.guard(options(tmp_path, hostvars, interrupt=asked))
    assert fleet.gated == []
    found = report.hosts["node01"].guardian
    assert found["decision"] == "kept_out"
    assert found["steps"][-1]["step"] == "gate" and found["steps"][-1]["outcome"] == "stopped"
    assert "SIGTERM" in found["steps"][-1]["message"]


def test_leaves_are_read_only_when_a_node_failed_on_its_roce_side() -> None:
    assert guardian.needs_leaves(watched({"node01": [failed("fabric.retransmits[mlx5_4]", 9)]}))
    assert guardian.needs_leaves(watched({"node01": [failed("rdma_link.link_state[mlx5_4]", "DOWN")]}))
    # the host's own PFC, a power cap: the node's, not a leaf's
    assert not guardian.needs_leaves(watched({"node01": [failed("fabric.host_pfc[mlx5_4]", 0)]}))
    assert not guardian.needs_leaves(watched({"node01": [failed("gpu_power.enforced_limit_w[GPU-a]")]}))


def test_act_steps_take_each_steps_first_start_and_last_end_and_its_failure() -> None:
    tasks = [
        task("Quarantine: drain"),
        task("GPU reset: reset every GPU", "skipped"),
        {
            **task("Reboot: restart through the BMC", "failed"),
            "msg": "the BMC refused",
            "end": "2026-12-06T20:40:00+00:00",
        },
    ]
    found = guardian.act_steps(tasks)
    assert [(s["step"], s["outcome"]) for s in found] == [("quarantine", "ok"), ("reboot", "failed")]
    assert found[1]["finished"] == "2026-12-06T20:40:00Z" and "the BMC refused" in found[1]["message"]


def test_the_leaves_settings_are_not_the_nodes(
    tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The listing holds the leaf switches too: their defaults must not disagree with the nodes' breaker."""
    fleet = Fleet(watched({"node01": []}), {})
    install(monkeypatch, fleet)
    listing = {
        "_meta": {"hostvars": {"node01": {"guardian_breaker_max_nodes": 9}, "leaf01": {}}},
        "leaf_switches": {"hosts": ["leaf01"]},
    }
    given = guardian.GuardianOptions(tmp_path / "inv.yml", None, tmp_path / "report", listing=listing)
    report = guardian.guard(given)
    assert report.guardian["breaker"]["limit"] == 1  # 10 % of one node, at least one
    assert "leaf01" not in report.hosts
