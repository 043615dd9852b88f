"""report.md, report.html and the console for a watch that acts (issue 39, docs/guardian.md): each node's
decision with its classes, drain reason and every step with its times and outcome; the run's breaker,
its leaves, and a --check run's note. A plain watch's report shows none of it."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufleet import cli, html_report, markdown_report
from gpufleet.report import Report, from_dict
from tests.unit.test_prom_guardian import acting_report


def _report() -> Report:
    report = acting_report()
    report.hosts["node02"].guardian["reason"] = "gpufleet watch: health.row_remap_pending[GPU-b] (row_remap)"
    report.hosts["node02"].guardian["steps"][1]["message"] = (
        "nvidia-smi -r: In use by another client | pid 4711"
    )
    return report


def test_report_md_shows_each_nodes_decision_and_steps_and_the_breaker() -> None:
    text = markdown_report.render(_report())
    print(text)
    assert (
        "**Guardian:** Circuit breaker open since 2026-12-06T20:31:00Z: 1 of 1 node(s) taken out in 60 min."
        in text
    )
    assert "**Guardian:** Leaf leaf02 explains its nodes' failures: PFC off on priority 3" in text
    assert "Check mode" not in text
    node02 = text.split("## node02: failed", 1)[1].split("\n## ", 1)[0]
    assert "**Guardian:** kept out (row_remap, xid), remediation gpu_reset" in node02
    assert "Drain reason: gpufleet watch: health.row_remap_pending[GPU-b] (row_remap)" in node02
    assert "| step | started | finished | outcome | message |" in node02
    assert "| quarantine | 2026-12-06T20:31:05Z | 2026-12-06T20:33:40Z | ok |  |" in node02
    # a '|' in a step's message stays in its cell
    assert (
        "| gpu_reset | 2026-12-06T20:31:05Z | 2026-12-06T20:33:40Z | failed | "
        "nvidia-smi -r: In use by another client \\| pid 4711 |" in node02
    )
    node08 = text.split("## node08: failed", 1)[1].split("\n## ", 1)[0]
    assert "**Guardian:** fabric (roce_port_down), leaf leaf02" in node08
    # node09: no decision, nothing failed: no section
    assert "## node09" not in text


def test_a_check_runs_report_says_nothing_was_changed() -> None:
    text = markdown_report.render(acting_report(check=True))
    assert "**Guardian:** Check mode (--check): nothing was changed" in text


def test_a_plain_watchs_report_md_and_html_have_no_guardian() -> None:
    report = acting_report()
    report.guardian = {}
    for host in report.hosts.values():
        host.guardian = {}
    assert "Guardian" not in markdown_report.render(report)
    page = html_report.render(report)
    assert "data-guardian" not in page and "Circuit breaker" not in page


def test_report_html_shows_the_decision_steps_breaker_and_leaves() -> None:
    page = html_report.render(_report())
    assert "data-guardian-run" in page
    assert "Circuit breaker open since 2026-12-06T20:31:00Z: 1 of 1 node(s) taken out in 60 min." in page
    assert 'data-guardian-leaf="leaf02"' in page
    assert 'data-guardian-decision="kept_out"' in page
    assert '<tr data-guardian-step="gpu_reset" class="bad">' in page
    assert "In use by another client | pid 4711" in page
    assert "gpufleet watch: health.row_remap_pending[GPU-b] (row_remap)" in page


def test_the_guardian_survives_report_json_and_hostile_text_is_escaped() -> None:
    report = _report()
    report.hosts["node03"].guardian["why"] = "<script>alert(1)</script>\x1b[2J"
    again = from_dict(report.as_dict())
    assert again.guardian == report.guardian
    assert again.hosts["node02"].guardian == report.hosts["node02"].guardian
    text = markdown_report.render(again)
    page = html_report.render(again)
    for out in (text, page):
        assert "<script>alert" not in out and "\x1b" not in out
    assert "&lt;script&gt;alert(1)&lt;/script&gt;\\x1b[2J" in text


def test_console_lines_name_each_decision() -> None:
    lines = markdown_report.guardian_console(_report())
    assert (
        lines[0]
        == "guardian: Circuit breaker open since 2026-12-06T20:31:00Z: 1 of 1 node(s) taken out in 60 min."
    )
    assert (
        "guardian: node02: kept out (row_remap, xid), remediation gpu_reset; "
        "steps: quarantine ok, gpu_reset failed, gate failed" in lines
    )
    assert not any(line.startswith("guardian: node09") for line in lines)


def test_the_console_prints_them_after_the_summary_and_nothing_for_a_plain_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = _report()
    report.hosts["node03"].guardian["why"] = "breaker open\x1b[2J"
    assert cli.print_summary(report, tmp_path) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[1].startswith("summary: ") and out[2].startswith("guardian: Circuit breaker open")
    assert "guardian: node03: would quarantine (nvlink): breaker open\\x1b[2J" in out
    report.guardian = {}
    for host in report.hosts.values():
        host.guardian = {}
    cli.print_summary(report, tmp_path)
    assert not [line for line in capsys.readouterr().out.splitlines() if line.startswith("guardian")]
