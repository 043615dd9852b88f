"""The report contract: JSON shape, Markdown for people, a textfile node_exporter can read."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.modules import gpu_facts, rdma_facts

from gpufleet import checks
from gpufleet.markdown_report import render as render_markdown
from gpufleet.prom import render as render_prometheus
from gpufleet.report import HostReport, Report, ReportError, load
from gpufleet.report_files import write


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
        "gpufleet_rdma": {"devices": {"mlx5_0": {"state": "DOWN", "netdev": "ens1np0"}}},
    }
    judged = [
        *gpu_facts.judged(facts["gpufleet_gpus"]),
        *rdma_facts.judged(facts["gpufleet_rdma"]["devices"]),
        *checks.facts_checks(facts, expected_gpus=2),
    ]
    failed = {c["name"]: c for c in judged if not c["ok"]}
    # The roles' and the gate's names for the same conditions, judged by the modules (gpu_facts and
    # rdma_facts with judge) with the roles' and the gate's own judges; the controller adds its own.
    assert set(failed) == {
        "gpu_power.enforced_limit_w[GPU-b]",
        "thermal.clocks_event_reasons[GPU-b]",
        "rdma_link.link_state[mlx5_0]",
    }
    assert failed["gpu_power.enforced_limit_w[GPU-b]"]["value"] == 1100.0
    assert failed["thermal.clocks_event_reasons[GPU-b]"]["value"] == ["hw_power_brake_slowdown"]


def test_missing_gpu_facts_fail_closed() -> None:
    result = checks.facts_checks({}, expected_gpus=16)
    assert [(c["name"], c["ok"]) for c in result] == [("gpu.facts", False)]


def test_unknown_power_reading_is_not_ok() -> None:
    gpu = _gpu("GPU-a", 1400.0)
    gpu["power"] = {"enforced_limit_w": None, "requested_limit_w": 1400.0}
    result = gpu_facts.judged([gpu])
    assert next(c for c in result if c["name"].startswith("gpu_power.enforced_limit_w"))["ok"] is False


def test_files_follow_the_contract(tmp_path: Path) -> None:
    report = Report(command="facts", started="2026-12-02T10:00:00Z", finished="2026-12-02T10:00:05Z")
    bad = checks.check("gpu.count", False, 15, 16, "GPUs", "15 of 16 GPUs visible")
    report.hosts["node02"] = HostReport(status="failed", checks=[bad], facts={"gpufleet_gpus": [{}] * 15})
    report.hosts["node01"] = HostReport(status="ok", facts={"gpufleet_gpus": [{}] * 16})
    report.hosts["node03"] = HostReport(status="unreachable", message="ssh: connect timed out")
    paths = write(report, tmp_path)
    data = json.loads(paths["json"].read_text())
    assert data["gpufleet_report"] == 2
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
        "interrupted": 0,
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
    assert 'gpufleet_host_status{host="node03",command="facts",status="unreachable"} 1' in prom
    assert 'gpufleet_failed_checks{host="node02",command="facts",area="gpu"} 1' in prom
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize(
    ("kwargs", "status"),
    [
        ({}, "ok"),
        ({"unreachable": True, "failed": True}, "unreachable"),
        ({"failed": True}, "failed"),
        ({"failed": True, "failed_as": "blocked"}, "blocked"),
        ({"checks": [checks.check("x", False, 1, 0, "", "bad")]}, "failed"),
        ({"checks": [checks.check("x", False, 1, 0, "", "bad")], "failed_as": "blocked"}, "blocked"),
        ({"checks": [checks.check("x", True, 0, 0, "", "fine")]}, "ok"),
        ({"changes": [checks.change("a.b[c]", 1, 2)]}, "changed"),
        ({"changes": [checks.change("a.b[c]", 1, 2)], "check_mode": True}, "drifted"),
        ({"changed": True}, "changed"),
        (
            {"changes": [checks.change("a.b[c]", 1, 2)], "checks": [checks.check("x", False, 1, 0, "", "")]},
            "failed",
        ),
    ],
)
def test_one_status_function(kwargs: dict[str, Any], status: str) -> None:
    assert checks.host_status(**kwargs) == status
    assert checks.is_good(status) is (status in ("ok", "changed"))


def test_the_controller_uses_the_collections_vocabulary() -> None:
    from ansible_collections.gpufleet.node.plugins.module_utils.core import results

    assert checks.HARMFUL_REASONS == results.HARMFUL_REASONS
    assert checks.check("a", 1, 2, 3, "u", "m") == results.check("a", 1, 2, 3, "u", "m")
    assert checks.change("s", 1, 2) == {"setting": "s", "from": 1, "to": 2}
    assert checks.hint("reboot\n  to apply") == "reboot to apply"


def test_prometheus_counts_each_condition_once() -> None:
    """The gate judges thermal.* at idle and under load: one condition, the failed reading wins."""
    idle = checks.check("thermal.gpu_temp_c[GPU-a]", True, 31, 60, "C", "idle")
    load = checks.check("thermal.gpu_temp_c[GPU-a]", False, 86, 83, "C", "under load")
    both_ok = [checks.check("thermal.tlimit_c[GPU-a]", True, v, 3, "C", str(v)) for v in (40, 12)]
    host = HostReport(status="blocked", checks=[idle, load, *both_ok])
    report = Report(command="gate", started="2026-12-02T10:00:00Z", finished="2026-12-02T10:00:05Z")
    report.hosts["node01"] = host
    prom = render_prometheus(report)
    failed = [line for line in prom.splitlines() if line.startswith("gpufleet_failed_checks")]
    assert failed == ['gpufleet_failed_checks{host="node01",command="gate",area="thermal"} 1']
    assert checks.one_per_condition([load, idle]) == [load]
    assert checks.one_per_condition(both_ok) == [both_ok[1]]


def test_a_host_refused_for_its_inputs_survives_the_round_trip_and_makes_the_exit_status_2(tmp_path) -> None:
    from gpufleet import cli
    from gpufleet.report import from_dict

    report = Report(command="provision", started="t0", finished="t1")
    report.hosts["node01"] = HostReport(status="ok")
    report.hosts["node02"] = HostReport(
        status="failed", message="gpu_power_limit_w ...", configuration_error=True
    )
    again = from_dict(report.as_dict())
    assert again.configuration_error() and again.hosts["node02"].configuration_error
    assert cli._exit_status(again) == 2
    report.hosts["node02"].configuration_error = False
    assert cli._exit_status(from_dict(report.as_dict())) == 1


def test_an_older_report_is_read_and_a_newer_one_refused_naming_the_versions(tmp_path: Path) -> None:
    data = Report(command="gate", started="2026-12-01T00:00:00Z", finished="2026-12-01T00:10:00Z").as_dict()
    data["hosts"] = {"node01": {"status": "blocked", "checks": [], "changes": [], "facts": {}}}
    data["gpufleet_report"] = 1  # written before the burn-in kept its samples
    path = tmp_path / "report.json"
    path.write_text(json.dumps(data))
    assert load(path).hosts["node01"].status == "blocked"
    data["gpufleet_report"] = 3
    path.write_text(json.dumps(data))
    with pytest.raises(ReportError, match=r"gpufleet_report is 3, this gpufleet reads 1, 2"):
        load(path)


def test_markdown_escapes_what_a_host_name_or_message_carries(tmp_path: Path) -> None:
    """A host name (or a module's message) with HTML, a '|' and line breaks neither injects HTML nor
    breaks a table row or a heading of report.md."""
    hostile = "<script>alert(1)</script>|evil\nnode99\r\n| x | y |"
    failed = checks.check("gpu.count", False, 7, 8, "GPUs", "7 of 8 <b>GPUs</b>\nvisible | now")
    report = Report(command="drift", started="t0", finished="t1")
    report.hosts[hostile] = HostReport(
        status="failed",
        checks=[failed],
        changes=[{"setting": "a|b\nc", "from": "<i>1</i>", "to": 2}],
        message="line one\n<img src=x onerror=alert(1)>",
    )
    report.hosts["node01"] = HostReport(status="ok")
    text = render_markdown(report)
    assert "<script>" not in text and "<img" not in text and "<b>" not in text and "<i>" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    lines = text.splitlines()

    def cells(row: str) -> list[str]:
        return re.split(r"(?<!\\)\|", row)[1:-1]

    # each row keeps its table's cells: no '|' or line break of the name split one
    drift_row = next(line for line in lines if line.startswith("| &lt;script") and "→" in line)
    assert len(cells(drift_row)) == 2, drift_row
    hosts_row = next(line for line in lines if line.endswith("| failed | - | 1 of 1 | 1 |"))
    assert len(cells(hosts_row)) == 5
    assert hosts_row.startswith("| &lt;script&gt;alert(1)&lt;/script&gt;\\|evil node99 \\| x \\| y \\| |")
    assert "## &lt;script&gt;alert(1)&lt;/script&gt;|evil node99 | x | y |: failed" in lines
    assert "line one &lt;img src=x onerror=alert(1)&gt;" in lines
    # nothing of the name begins a line of its own
    assert not any(line.startswith(("node99", "| x | y |")) for line in lines)


# a forged lock record's user, a node's output: a terminal showing them raw would clear its screen,
# move the cursor, turn the text around
HOSTILE = "x\x1b[2J\x1b[H\x1b]0;owned\x07\u202eevil\x9b"


def test_control_characters_reach_no_report_file_raw(tmp_path: Path) -> None:
    report = Report(command="gate", started="t0", finished="t1", interrupted=f"asked {HOSTILE}")
    failed = checks.check("gpu.count", False, HOSTILE, 8, "GPUs", f"read {HOSTILE}")
    report.hosts[f"node01{HOSTILE}"] = HostReport(
        status="failed",
        checks=[failed],
        changes=[{"setting": "a", "from": HOSTILE, "to": 2}],
        message=f"the node is held by gpufleet gate by {HOSTILE} on laptop1",
    )
    written = write(report, tmp_path)
    for kind in ("md", "prom", "html"):
        text = written[kind].read_text(encoding="utf-8")
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202e]", text), kind
        assert "\\x1b[2J\\x1b[H" in text or "\\\\x1b[2J\\\\x1b[H" in text, kind
    # report.json keeps what came, JSON-escaped: it is data, no terminal reads it raw
    text = written["json"].read_text()
    assert "\\u001b[2J" in text and "\x1b" not in text
    assert load(written["json"]).hosts[f"node01{HOSTILE}"].message.endswith(f"{HOSTILE} on laptop1")


@pytest.mark.parametrize("name", ["report.json", "report.md", "report.html", "gpufleet.prom"])
def test_a_planted_link_in_the_report_dir_is_never_written_through(tmp_path: Path, name: str) -> None:
    """report.json.tmp / report.md.tmp (the names an older writer used) and the files themselves as
    links to a file of someone else: that file is left as it was, the report written beside."""
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / f"{name}.tmp").symlink_to(victim)
    (reports / name).symlink_to(victim)
    written = write(Report(command="facts", started="t0", finished="t1"), reports)
    assert victim.read_text() == "precious\n"
    target = reports / name
    assert not target.is_symlink() and target.stat().st_mode & 0o777 == 0o644
    assert target.read_text() == written[next(k for k, p in written.items() if p.name == name)].read_text()
    assert sorted(p.name for p in reports.iterdir() if p.name.endswith(".tmp")) == [f"{name}.tmp"]


def test_a_report_that_cannot_be_written_leaves_no_temporary_file(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "report.md").mkdir()  # os.replace cannot put a file over a directory
    with pytest.raises(OSError):
        write(Report(command="facts", started="t0", finished="t1"), reports)
    assert [p.name for p in reports.iterdir()] == ["report.md"]  # report.md is written first
