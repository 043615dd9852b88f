"""`gpufleet facts` on a simulated fleet: the report contract and faults made visible."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gpufleet_sim import control

from gpufleet import cli


@pytest.fixture(scope="module")
def fleet(fleet_factory):
    return fleet_factory(nodes=3, subnet="127.0.3")


def _run(fleet, tmp_path: Path, *extra: str) -> tuple[int, dict]:
    report_dir = tmp_path / "report"
    code = cli.main(
        ["facts", "--inventory", str(fleet.inventory_path), "--report-dir", str(report_dir), *extra]
    )
    return code, json.loads((report_dir / "report.json").read_text())


def test_clean_fleet_reports_every_gpu_and_port(fleet, tmp_path: Path) -> None:
    code, report = _run(fleet, tmp_path)
    assert code == 0
    assert report["gpufleet_report"] == 2 and report["command"] == "facts"
    assert set(report["hosts"]) == {"node01", "node02", "node03"}
    for host in report["hosts"].values():
        assert host["status"] == "ok", host["checks"]
        gpus = host["facts"]["gpufleet_gpus"]
        assert len(gpus) == 16
        assert {g["power"]["enforced_limit_w"] for g in gpus} == {1400.0}
        assert [len(d) for d in host["facts"]["gpufleet_gpu_topology"]["nvlink_domains"]] == [8, 8]
        assert len(host["facts"]["gpufleet_rdma"]["devices"]) == 8
    assert report["summary"]["ok"] == 3
    prom = (tmp_path / "report" / "gpufleet.prom").read_text()
    assert 'gpufleet_host_status{host="node02",command="facts",status="ok"} 1' in prom


def test_faults_are_named_on_their_node_only(fleet, tmp_path: Path) -> None:
    control.fault(fleet, "node02", "power-capped", clear=False)
    control.fault(fleet, "node03", "gpu-missing", clear=False)
    try:
        code, report = _run(fleet, tmp_path)
    finally:
        control.fault(fleet, "node02", None, clear=True)
        control.fault(fleet, "node03", None, clear=True)
    assert code == 1
    hosts = report["hosts"]
    assert hosts["node01"]["status"] == "ok"
    failed02 = [c for c in hosts["node02"]["checks"] if not c["ok"]]
    assert len(failed02) == 16
    assert all(c["name"].startswith("gpu_power.enforced_limit_w[GPU-") for c in failed02)
    assert {c["value"] for c in failed02} == {1100.0} and {c["limit"] for c in failed02} == {1400.0}
    failed03 = [c for c in hosts["node03"]["checks"] if not c["ok"]]
    assert [(c["name"], c["value"], c["limit"]) for c in failed03] == [("gpu.count", 15, 16)]
    md = (tmp_path / "report" / "report.md").read_text()
    assert "## node02: failed" in md and "below the requested 1400.0 W" in md


def test_limit_restricts_the_run(fleet, tmp_path: Path) -> None:
    code, report = _run(fleet, tmp_path, "--limit", "node01")
    assert code == 0
    assert list(report["hosts"]) == ["node01"]


def test_unreachable_node_is_reported_while_the_rest_complete(fleet, tmp_path: Path) -> None:
    victim = fleet.processes["node03"]
    inventory = tmp_path / "inventory.yml"
    text = fleet.inventory_path.read_text().replace("127.0.3.4", "127.0.3.250")
    inventory.write_text(text)
    (tmp_path / "group_vars").symlink_to(fleet.root / "group_vars")
    report_dir = tmp_path / "report"
    code = cli.main(["facts", "--inventory", str(inventory), "--report-dir", str(report_dir)])
    report = json.loads((report_dir / "report.json").read_text())
    assert victim.poll() is None
    assert code == 1
    assert report["hosts"]["node03"]["status"] == "unreachable"
    assert "127.0.3.250" in report["hosts"]["node03"]["message"]
    assert report["hosts"]["node01"]["status"] == "ok" and report["hosts"]["node02"]["status"] == "ok"


def test_missing_inventory_is_a_usage_error(tmp_path: Path, capsys) -> None:
    code = cli.main(["facts", "--inventory", str(tmp_path / "nope.yml"), "--report-dir", str(tmp_path)])
    assert code == 2
    assert "does not exist" in capsys.readouterr().err
