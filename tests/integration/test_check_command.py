"""`gpufleet check` on one simulated node (subnet 127.0.62): a PDU-capped node's power limits are
reported as the change provision would make, exit 1, and nothing is written on the node;
`gpufleet report` then prints that report again with the same exit status."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpufleet import cli
from gpufleet.sim import control, state
from gpufleet.sim.fleet import Fleet


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
        code = cli.main(["check", "--inventory", str(fleet.inventory_path), "--report-dir", str(report_dir)])
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
