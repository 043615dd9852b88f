"""`gpufleet check` on one simulated node (subnet 127.0.62): a PDU-capped node's power limits are
reported as the change provision would make, exit 1, and nothing is written on the node;
`gpufleet report` then prints that report again with the same exit status."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from gpufleet_sim import control, state
from gpufleet_sim.fleet import Fleet

from gpufleet import cli
from tests.integration.conftest import run_on


@pytest.fixture(scope="module")
def fleet(fleet_factory) -> Fleet:
    started: Fleet = fleet_factory(nodes=1, subnet="127.0.62")
    return started


def written(node_dir: Path) -> dict[str, Any]:
    """What a run could change on the node: its /etc (the overlay upper dir) and its device state."""
    upper = node_dir / "etc-upper"
    files = {str(p.relative_to(upper)): p.read_bytes() for p in sorted(upper.rglob("*")) if p.is_file()}
    return {"etc": files, "state": state.load(node_dir)}


def test_check_reports_the_power_cap_and_writes_nothing(fleet: Fleet, tmp_path: Path, capsys) -> None:
    node_dir = fleet.root / "nodes" / "node01"
    control.fault(fleet, "node01", "power-capped", clear=False)
    try:
        before = written(node_dir)
        uuids = [g["uuid"] for g in state.present_gpus(before["state"])]
        report_dir = tmp_path / "check"
        code = cli.main(
            [
                "check",
                "--inventory",
                str(fleet.inventory_path),
                "--vault-password-file",
                str(fleet.vault_password_file),
                "--report-dir",
                str(report_dir),
            ]
        )
        assert written(node_dir) == before
    finally:
        control.fault(fleet, "node01", None, clear=True)

    assert code == 1
    report = json.loads((report_dir / "report.json").read_text())
    assert report["command"] == "provision --check"
    host = report["hosts"]["node01"]
    assert host["status"] == "drifted", host
    power = [c for c in host["changes"] if c["setting"].startswith("gpu_power.enforced_limit_w[")]
    assert power == [
        {"setting": f"gpu_power.enforced_limit_w[{u}]", "from": 1100.0, "to": 1400.0} for u in uuids
    ]

    capsys.readouterr()
    assert cli.main(["report", "--report-dir", str(report_dir)]) == 1
    shown = capsys.readouterr().out
    assert shown == (report_dir / "report.md").read_text()
    assert "## node01: drifted" in shown
    assert f"| gpu_power.enforced_limit_w[{uuids[0]}] | 1100.0 | 1400.0 |" in shown


def _series(report_dir: Path) -> list[str]:
    """Every series (name and label set) in a run's gpufleet.prom."""
    prom = (report_dir / "gpufleet.prom").read_text()
    return [line.rsplit(" ", 1)[0] for line in prom.splitlines() if line and not line.startswith("#")]


def test_one_name_per_condition_in_every_command(fleet: Fleet, tmp_path: Path) -> None:
    """A PDU-capped node with a RoCE link down, through facts, check, drift and the gate: each
    command that can show a condition shows it under the same name, and every .prom has one series
    per condition per host."""
    node_dir = fleet.root / "nodes" / "node01"
    control.fault(fleet, "node01", "power-capped", clear=False)
    control.fault(fleet, "node01", "link-down", clear=False)
    reports: dict[str, dict[str, Any]] = {}
    try:
        uuids = [g["uuid"] for g in state.present_gpus(state.load(node_dir))]
        # Both faults: the link that is down, named by facts, check and drift.
        for command in (["facts"], ["check"], ["drift"]):
            _, report = run_on(fleet, tmp_path / command[0], *command)
            reports[command[0]] = report["hosts"]["node01"]
        # The link back up (a host that fails its first role is not compared further): the power
        # cap, named by check, drift and the gate, which fixes it.
        control.fault(fleet, "node01", "link-down", clear=True)
        for command in (["check"], ["drift"], ["gate", "--burn-in-seconds", "5"]):
            name = command[0] + "-power"
            _, report = run_on(fleet, tmp_path / name, *command)
            reports[name] = report["hosts"]["node01"]
    finally:
        control.fault(fleet, "node01", None, clear=True)

    def failed(command: str, prefix: str) -> set[str]:
        return {c["name"] for c in reports[command]["checks"] if not c["ok"] and c["name"].startswith(prefix)}

    def settings(command: str, prefix: str) -> set[str]:
        return {c["setting"] for c in reports[command]["changes"] if c["setting"].startswith(prefix)}

    power = {f"gpu_power.enforced_limit_w[{u}]" for u in uuids}
    # facts judges the cap as a failed check; check and drift name it as the change that fixes it;
    # the gate makes that change and then checks it took.
    assert failed("facts", "gpu_power.enforced_limit_w[") == power
    assert settings("check-power", "gpu_power.enforced_limit_w[") == power
    assert settings("drift-power", "gpu_power.enforced_limit_w[") == power
    assert settings("gate-power", "gpu_power.enforced_limit_w[") == power
    assert {c["name"] for c in reports["gate-power"]["checks"] if c["name"] in power} == power
    # The link that is down: one name in facts, check and drift (the gate does not look at RDMA).
    link = failed("facts", "rdma_link.link_state[")
    assert len(link) == 1
    assert failed("check", "rdma_link.link_state[") == link
    assert failed("drift", "rdma_link.link_state[") == link
    for command in reports:
        series = _series(tmp_path / command)
        assert len(series) == len(set(series)), command
    prom = (tmp_path / "facts" / "gpufleet.prom").read_text()
    # per-check detail stays in report.json: the file counts failed conditions per area
    assert f'gpufleet_failed_checks{{host="node01",command="facts",area="gpu_power"}} {len(power)}' in prom
    assert 'gpufleet_failed_checks{host="node01",command="facts",area="rdma_link"} 1' in prom
    assert "GPU-" not in "".join(s for s in _series(tmp_path / "facts") if "uuid=" not in s)
