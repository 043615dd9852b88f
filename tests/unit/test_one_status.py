"""One status everywhere: the line the console prints for a host says the status its report.json,
report.md, report.html and gpufleet.prom give it, for every command (drift, drift --fix, check,
provision, the gate) and every kind of host: ok, changed, drifted, failed (a task, or only a check),
blocked, unreachable, and the leaf switches a run on the nodes only reads.

ansible-runner is replaced by a replay of the events each playbook would send (the rest is the real
path: runner's event handler, progress.Display, the command's report, its files on disk)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import ansible_runner
import pytest

from gpufleet import catalog, checks, drift, report_files
from gpufleet.commands import gate as gate_command
from gpufleet.commands import provision as provision_command
from gpufleet.commands import registry
from gpufleet.commands.base import CommonOptions

LEAF_PLAY = f"{catalog.LEAF_READ_PLAY} (its side of every RoCE link)"
POWER = "gpu_power.enforced_limit_w[GPU-1]"
CHANGE = {"setting": "gpu_power.power_limit_w[GPU-1]", "from": 1100, "to": 1400}
LEAF_CHANGE = {"setting": "qos/congestion-control/traffic-class/3/ecn", "from": "disable", "to": "enable"}
READ = "Read the leaf's lossless RoCE settings"


def _check(ok: bool) -> dict[str, Any]:
    return checks.check(POWER, ok, 1400 if ok else 1100, 1400, "W", "enforced power limit")


def _event(kind: str, host: str, play: str, res: dict[str, Any], task: str = "Apply") -> dict[str, Any]:
    data = {"host": host, "play": play, "task": task, "task_uuid": task, "res": res}
    return {"event": f"runner_on_{kind}", "event_data": data}


def _leaves(changed: bool) -> list[dict[str, Any]]:
    """Both leaves read in check mode (roles/switch_qos read): leaf01 differs from its profile, and
    says changed as a check-mode module does; leaf02 matches it."""
    found = {"changed": changed, "changes": [LEAF_CHANGE], "checks": []}
    return [
        _event("ok", "leaf01", LEAF_PLAY, found, task=READ),
        _event("ok", "leaf02", LEAF_PLAY, {"changes": [], "checks": []}, task=READ),
    ]


# Each playbook's events: the hosts, in the order a run sends them (play by play).
def _drift_events() -> list[dict[str, Any]]:
    play = "Compare every role with each node"
    return [
        *_leaves(changed=True),
        _event("ok", "node01", play, {"changes": [], "checks": [_check(True)]}, "Compare"),
        _event("ok", "node02", play, {"changed": True, "changes": [CHANGE], "checks": []}, "Compare"),
        _event("failed", "node03", play, {"msg": "rdma_qos: no port ens9"}, "Compare"),
        # the case the console called ok: the module ran, a check failed ("ok, 16 failed checks")
        _event("ok", "node04", play, {"changes": [], "checks": [_check(False)] * 16}, "Compare"),
        _event("unreachable", "node05", play, {"msg": "Failed to connect to the host via ssh"}, "Compare"),
    ]


def _provision_events(check_mode: bool) -> list[dict[str, Any]]:
    play = "Apply every role"
    return [
        *_leaves(changed=True),
        _event("ok", "node01", play, {"changes": [], "checks": [_check(True)]}),
        _event("ok", "node02", play, {"changed": True, "changes": [CHANGE], "checks": [_check(True)]}),
        _event("failed", "node03", play, {"msg": "rdma_qos: no port ens9"}),
        _event("ok", "node04", play, {"changes": [], "checks": [_check(False)] * 16}),
        _event("unreachable", "node05", play, {"msg": "Failed to connect to the host via ssh"}),
    ]


def _gate_events() -> list[dict[str, Any]]:
    play = "Post-maintenance gate"
    drain = {"changed": True}
    return [
        *_leaves(changed=True),
        # node01 passes; the drain and the roles' re-assertion changed it (the console said changed)
        _event("ok", "node01", play, drain, "gpufleet.node.drain : Drain the node in Slurm"),
        _event("ok", "node01", play, {"changed": True, "changes": [CHANGE], "checks": [_check(True)]}),
        _event("ok", "node02", play, {"changes": [], "checks": [_check(True)]}),
        _event("ok", "node03", play, drain, "gpufleet.node.drain : Drain the node in Slurm"),
        _event("failed", "node03", play, {"msg": "rdma_link: ens9 is down"}),
        # a failed check with no failed task blocks the node too
        _event("ok", "node04", play, {"changes": [], "checks": [_check(False)]}),
        _event("unreachable", "node05", play, {"msg": "Failed to connect to the host via ssh"}),
    ]


def _fix_events() -> list[dict[str, Any]]:
    """drift --fix's batch (node02, the drifted node): judged, drained, fixed, undrained."""
    return [
        *_leaves(changed=True),
        _event("ok", "node02", "Fix", {"changed": True}, "gpufleet.node.drain : Drain the node in Slurm"),
        _event("ok", "node02", "Fix", {"changed": True, "changes": [CHANGE], "checks": [_check(True)]}),
    ]


PLAYS = {
    "drift.yml": _drift_events,
    "drift_fix.yml": _fix_events,
    "post_maintenance.yml": _gate_events,
}


@pytest.fixture
def replay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """ansible_runner.run replays the playbook's events to runner's handler; the console is a stream
    without a terminal (a line per host)."""
    monkeypatch.setenv("GPUFLEET_STATE_DIR", str(tmp_path / "state"))
    console = io.StringIO()

    def run(**kwargs: Any) -> SimpleNamespace:
        playbook = Path(kwargs["playbook"]).name
        check_mode = "--check" in (kwargs.get("cmdline") or "")
        found = _provision_events(check_mode) if playbook == "provision.yml" else PLAYS[playbook]()
        handler = kwargs["event_handler"]
        handler({"event": "playbook_on_start", "event_data": {}})
        for event in found:
            handler(event)
        names = sorted({e["event_data"]["host"] for e in found})
        handler({"event": "playbook_on_stats", "event_data": {"processed": dict.fromkeys(names, 1)}})
        return SimpleNamespace(status="successful", rc=0)

    monkeypatch.setattr(ansible_runner, "run", run)
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all: {}\n")
    # the console as the CLI makes it: the registry's judges
    return {"console": console, "display": registry.console(console), "inventory": inventory}


def _console(console: io.StringIO) -> dict[str, str]:
    """Each host's status in the console's lines (the last line a host got: drift --fix prints the
    drift's and then its batch's)."""
    said: dict[str, str] = {}
    for line in console.getvalue().splitlines():
        if line.startswith("drift --fix: batch"):
            continue  # gpufleet's own line, not a host's
        name, status = line.split()[:2]
        said[name] = status
    return said


def _written(report_dir: Path) -> dict[str, str]:
    """Each host's status in report.json, checked against report.md, report.html and gpufleet.prom."""
    hosts = json.loads((report_dir / "report.json").read_text())["hosts"]
    statuses = {name: host["status"] for name, host in hosts.items()}
    markdown = (report_dir / "report.md").read_text()
    page = (report_dir / "report.html").read_text()
    metrics = (report_dir / "gpufleet.prom").read_text()
    for name, status in statuses.items():
        assert f"| {name} | {status} |" in markdown, (name, status)
        card = rf'class="card s-border-{status}" data-host="{name}"'
        card += rf'|badge s-{status}">{status}</span> <b>{name}</b>'
        assert re.search(card, page), (name, status)
        metric = rf'gpufleet_host_status\{{[^}}]*host="{name}"[^}}]*status="{status}"\}} 1'
        assert re.search(metric, metrics), (name, status)
    return statuses


def _run(command: str, replay: dict[str, Any], report_dir: Path) -> dict[str, str]:
    inventory, display = replay["inventory"], replay["display"]
    if command.startswith("drift"):
        options = drift.DriftOptions(inventory, None, report_dir, fix=command == "drift --fix", batch="1")
        report = drift.drift(options, display)
    elif command == "gate":
        report = gate_command.gate(CommonOptions(inventory, None, report_dir), display=display)
    else:
        options = CommonOptions(inventory, None, report_dir, check=command == "check")
        report = provision_command.provision(options, display)
    report_files.write(report, report_dir)
    return _written(report_dir)


HOSTS = ("leaf01", "leaf02", "node01", "node02", "node03", "node04", "node05")
# What each command's report says of each host (and so its console), a status per host of HOSTS.
STATUSES = {
    "drift": ("drifted", "ok", "ok", "drifted", "failed", "failed", "unreachable"),
    "drift --fix": ("drifted", "ok", "ok", "changed", "failed", "failed", "unreachable"),
    "check": ("drifted", "ok", "ok", "drifted", "failed", "failed", "unreachable"),
    # provision only reads the leaves: leaf01's difference is drift, not a change
    "provision": ("drifted", "ok", "ok", "changed", "failed", "failed", "unreachable"),
    # the gate judges nodes: one that passed is ok though its drain and re-assertion changed it; a
    # leaf it only read is judged as drift judges it (leaf01's profile differs: drifted, not ok)
    "gate": ("drifted", "ok", "ok", "ok", "blocked", "blocked", "unreachable"),
}
EXPECTED = {command: dict(zip(HOSTS, statuses, strict=True)) for command, statuses in STATUSES.items()}


@pytest.mark.parametrize("command", sorted(EXPECTED))
def test_the_console_says_each_hosts_status_as_the_report_does(
    command: str, replay: dict[str, Any], tmp_path: Path
) -> None:
    written = _run(command, replay, tmp_path / "report")
    said = _console(replay["console"])
    assert said == written
    assert written == EXPECTED[command]


def test_a_failed_check_alone_is_named_on_the_console_as_in_the_report(
    replay: dict[str, Any], tmp_path: Path
) -> None:
    """`make demo`'s 'node01 ok 16 failed checks': the line now says failed, with the count."""
    _run("provision", replay, tmp_path / "report")
    lines = {line.split()[0]: line.split(None, 1)[1] for line in replay["console"].getvalue().splitlines()}
    assert lines["node04"].split() == ["failed", "16", "failed", "checks"]
    assert lines["leaf01"].split() == ["drifted", "1", "setting"]


def test_the_prom_file_sets_one_status_per_host(replay: dict[str, Any], tmp_path: Path) -> None:
    """gpufleet.prom takes the report's status: each host has exactly one status set to 1."""
    _run("gate", replay, tmp_path / "report")
    metrics = (tmp_path / "report" / "gpufleet.prom").read_text()
    set_to_one = re.findall(r'gpufleet_host_status\{[^}]*host="([^"]+)"[^}]*\} 1', metrics)
    assert sorted(set_to_one) == sorted(EXPECTED["gate"])
