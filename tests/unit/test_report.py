"""The report contract: JSON shape, Markdown for people, a textfile node_exporter can read."""

from __future__ import annotations

import json
import re
from pathlib import Path

from gpufleet import checks
from gpufleet.report import HostReport, Report, write


def _gpu(uuid: str, enforced: float, reasons: list[str] | None = None) -> dict[str, object]:
    return {
        "uuid": uuid,
        "persistence_mode": True,
        "power": {"enforced_limit_w": enforced, "requested_limit_w": 1400.0},
        "clocks_event_reasons": reasons or [],
        "ecc": {"volatile_uncorrected": 0},
    }


def test_capped_gpu_and_active_throttle_are_failed_checks() -> None:
    facts = {
        "gpufleet_gpus": [
            _gpu("GPU-a", 1400.0),
            _gpu("GPU-b", 1100.0, ["hw_power_brake_slowdown", "gpu_idle"]),
        ],
        "gpufleet_gpu_topology": {"nvlink_domains": [["GPU-a", "GPU-b"]]},
        "gpufleet_rdma": {"devices": {"mlx5_0": {"state": "1: DOWN", "netdev": "ens1np0"}}},
    }
    failed = {c["name"]: c for c in checks.facts_checks(facts, expected_gpus=2) if not c["ok"]}
    assert set(failed) == {
        "gpu.power.enforced_limit_w[GPU-b]",
        "gpu.clocks_event_reasons[GPU-b]",
        "rdma.link_state[mlx5_0]",
    }
    assert failed["gpu.power.enforced_limit_w[GPU-b]"]["value"] == 1100.0
    assert failed["gpu.clocks_event_reasons[GPU-b]"]["value"] == ["hw_power_brake_slowdown"]


def test_missing_gpu_facts_fail_closed() -> None:
    result = checks.facts_checks({}, expected_gpus=16)
    assert [(c["name"], c["ok"]) for c in result] == [("gpu.facts", False)]


def test_unknown_power_reading_is_not_ok() -> None:
    gpu = _gpu("GPU-a", 1400.0)
    gpu["power"] = {"enforced_limit_w": None, "requested_limit_w": 1400.0}
    result = checks.facts_checks({"gpufleet_gpus": [gpu]}, expected_gpus=None)
    assert next(c for c in result if c["name"].startswith("gpu.power"))["ok"] is False


def test_files_follow_the_contract(tmp_path: Path) -> None:
    report = Report(command="facts", started="2026-12-02T10:00:00Z", finished="2026-12-02T10:00:05Z")
    bad = checks.check("gpu.count", False, 15, 16, "GPUs", "15 of 16 GPUs visible")
    report.hosts["node02"] = HostReport(status="failed", checks=[bad], facts={"gpufleet_gpus": [{}] * 15})
    report.hosts["node01"] = HostReport(status="ok", facts={"gpufleet_gpus": [{}] * 16})
    report.hosts["node03"] = HostReport(status="unreachable", message="ssh: connect timed out")
    paths = write(report, tmp_path)
    data = json.loads(paths["json"].read_text())
    assert data["gpufleet_report"] == 1
    assert list(data["hosts"]) == ["node01", "node02", "node03"]
    assert set(data["hosts"]["node02"]) == {"status", "checks", "changes", "facts"}
    assert data["hosts"]["node03"]["message"] == "ssh: connect timed out"
    assert data["summary"] == {
        "ok": 1,
        "changed": 0,
        "drifted": 0,
        "blocked": 0,
        "failed": 1,
        "unreachable": 1,
        "hosts": 3,
    }
    md = paths["md"].read_text()
    assert "| node02 | failed | 15 | 1 of 1 | 0 |" in md
    assert "| gpu.count | 15 GPUs | 16 GPUs | 15 of 16 GPUs visible |" in md
    assert "## node03: unreachable" in md
    prom = paths["prom"].read_text()
    # every sample line is `name{labels} value`, every metric has HELP and TYPE
    samples = [line for line in prom.splitlines() if not line.startswith("#")]
    assert all(re.fullmatch(r"[a-z_]+(\{[^}]*\})? [0-9.e+-]+", line) for line in samples)
    assert 'gpufleet_host_ok{host="node03",command="facts"} 0' in prom
    assert 'gpufleet_check_ok{host="node02",check="gpu.count"} 0' in prom
    assert not list(tmp_path.glob("*.tmp"))
