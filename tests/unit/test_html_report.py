"""report.html (html_report.render): the page's content from constructed reports, and the page as a
person sees it in a real headless Chromium (tests/browser.py): no console error, nothing fetched but
the file, one heat-map cell per node x drifted setting, a blocked node's failed reading and its
burn-in chart. Screenshots go to $GPUFLEET_ARTIFACTS (default reports/test-artifacts/)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from gpufleet import html_charts, html_report
from gpufleet.report import HostReport, Report, from_dict
from tests.browser import ARTIFACTS, Chromium, PageFacts
from tests.unit.test_prom_guardian import acting_report

ESCAPED_MESSAGE = "reboot node <script>alert(1)</script> & check"


def check(
    name: str, ok: bool, value: Any = None, limit: Any = None, unit: str = "", message: str = ""
) -> dict[str, Any]:
    return {"name": name, "ok": ok, "value": value, "limit": limit, "unit": unit, "message": message or name}


def drift_report() -> Report:
    """3 nodes drifted in the same 2 settings (a leaf among them, NVUE paths), one clean node."""
    report = Report(command="drift", started="2026-12-04T06:00:00Z", finished="2026-12-04T06:01:00Z")
    changes = [
        {"setting": "gpu_power.enforced_limit_w[GPU-0]", "from": 1100, "to": 1400},
        {"setting": "rdma_qos.trust[mlx5_0]", "from": "pcp", "to": "dscp"},
    ]
    for name in ("node01", "node02"):
        report.hosts[name] = HostReport(
            status="drifted",
            checks=[check("rdma_link.link_state[mlx5_0]", True, "ACTIVE", "ACTIVE")],
            changes=list(changes),
            message=ESCAPED_MESSAGE if name == "node01" else "",
        )
    report.hosts["node03"] = HostReport(
        status="failed",
        checks=[check("fabric.switch_pfc[node03:mlx5_4 -> leaf02:swp9]", False, [], [3])],
        changes=list(changes),
    )
    report.hosts["node04"] = HostReport(status="ok", checks=[check("rdma_link.link_state[mlx5_0]", True)])
    return report


def burn_in(gpus: int = 2, samples: int = 30) -> dict[str, Any]:
    """GPU 1 crosses the 83 C limit from t=20 on, throttle events; a sample lacks a reading."""
    traces = []
    for index in range(gpus):
        t = [float(s) for s in range(samples)]
        hot = index == 1
        gpu_c: list[float | None] = [50.0 + s * (1.5 if hot else 0.8) for s in range(samples)]
        gpu_c[min(5, samples - 1)] = None
        traces.append(
            {
                "uuid": f"GPU-{index:04d}",
                "index": index,
                "t": t,
                "gpu_c": gpu_c,
                "memory_c": [55.0 + s * 0.5 for s in range(samples)],
                "sm_mhz": [1980.0 - (400.0 if hot and s >= 22 else 0.0) for s in range(samples)],
                "power_w": [300.0 + min(s, 10) * 80.0 for s in range(samples)],
                "events": [{"t": float(s), "reasons": ["hw_thermal_slowdown"]} for s in (22, 25)]
                if hot
                else [],
            }
        )
    return {
        "interval_s": 1.0,
        "duration_s": float(samples),
        "limits": {"max_gpu_temp_c": 83.0, "max_memory_temp_c": 90.0, "min_tlimit_c": 3.0},
        "gpus": traces,
    }


def coolant(flow: float) -> dict[str, Any]:
    connector = {
        "key": "1/Baseboard1",
        "name": "GPU Baseboard #1 Cold Plates",
        "health": "Critical" if flow < 8 else "OK",
        "flow_lpm": flow,
        "supply_c": 25.0,
        "return_c": 33.4,
        "delta_c": 8.4,
        "leak": "OK",
    }
    return {"connectors": [connector], "cdus": []}


def gate_report() -> Report:
    report = Report(command="gate", started="2026-12-04T06:00:00Z", finished="2026-12-04T06:10:00Z")
    report.hosts["node01"] = HostReport(
        status="blocked",
        checks=[
            check(
                "thermal.gpu_temp_c[GPU-0001]", False, 93.5, 83.0, "C", "GPU-0001 reached 93.5 C under load"
            ),
            check("coolant.flow_lpm[1/Baseboard1]", False, 4.8, 8.0, "L/min", "flow 4.8 L/min below 8"),
            check("coolant.supply_temp_c[1/Baseboard1]", True, 25.0, 35.0, "C"),
            check("coolant.delta_temp_c[1/Baseboard1]", True, 8.4, 12.0, "K"),
        ],
        facts={"gpufleet_burn_in": burn_in(), "gpufleet_coolant": coolant(4.8)},
        message="did not pass the post-maintenance gate at gpufleet.node.thermal_gate : thermal gate blocked",
    )
    report.hosts["node02"] = HostReport(
        status="ok",
        checks=[check("thermal.gpu_temp_c[GPU-0101]", True, 70.0, 83.0, "C")],
        facts={"gpufleet_burn_in": burn_in(gpus=1), "gpufleet_coolant": coolant(19.2)},
    )
    return report


def facts_report() -> Report:
    gpu = {"index": 0, "uuid": "GPU-0", "power": {"enforced_limit_w": 1400.0, "requested_limit_w": 1400.0}}
    report = Report(command="facts", started="2026-12-04T06:00:00Z", finished="2026-12-04T06:00:05Z")
    report.hosts["node01"] = HostReport(
        status="ok",
        checks=[check("gpu_power.enforced_limit_w[GPU-0]", True, 1400.0, 1400.0, "W")],
        facts={"gpufleet_gpus": [gpu]},
    )
    return report


def old_report() -> Report:
    """A contract-1 report.json from before the burn-in kept its samples."""
    data = {
        "gpufleet_report": 1,
        "command": "gate",
        "started": "2026-11-01T00:00:00Z",
        "finished": "2026-11-01T00:05:00Z",
        "hosts": {
            "node07": {
                "status": "blocked",
                "checks": [check("thermal.memory_temp_c[GPU-7]", False, 97, 90, "C")],
                "changes": [],
                "facts": {"gpufleet_gpus": []},
                "message": "did not pass the post-maintenance gate at gpufleet.node.burn_in : too hot",
            }
        },
    }
    return from_dict(data)


def guardian_report() -> Report:
    """A watch that acts (docs/guardian.md): decisions, steps, the breaker and a leaf."""
    return acting_report()


REPORTS = {
    "drift": drift_report,
    "gate": gate_report,
    "facts": facts_report,
    "old": old_report,
    "guardian": guardian_report,
}


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[str, PageFacts]]]:
    """Every report rendered and opened once, in one Chromium for the module."""
    where = tmp_path_factory.mktemp("html")
    opened: dict[str, tuple[str, PageFacts]] = {}
    with Chromium() as chromium:
        for name, build in REPORTS.items():
            html = html_report.render(build())
            path = where / f"{name}.html"
            path.write_text(html, encoding="utf-8")
            opened[name] = (html, chromium.open_page(path, ARTIFACTS / f"report-html-{name}.png"))
    yield opened


def test_the_page_escapes_the_report_and_links_nothing_outside() -> None:
    html = html_report.render(drift_report())
    assert "<script>alert(1)</script>" not in html
    assert "reboot node &lt;script&gt;alert(1)&lt;/script&gt; &amp; check" in html
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html, re.I)
    assert "<link" not in html and "@import" not in html
    assert html.count("<script>") == 1  # the page's own, inline


def test_heat_map_has_one_cell_per_drifted_node_and_setting() -> None:
    html = html_report.render(drift_report())
    assert html.count("<td data-cell") == 3 * 2
    assert html.count('data-setting-count="3"') == 2
    assert 'title="node01 · gpu_power.enforced_limit_w\nGPU-0: 1100 → 1400"' in html
    assert "<summary>1 GPU 1100 → 1400</summary>" in html and "<summary>1 port pcp → dscp</summary>" in html
    assert 'data-host="node04"' in html  # the clean node has its details, not a row
    assert '<tr data-host="node04"' not in html


def sixteen_gpus_drifted() -> Report:
    """3 nodes whose 16 GPUs all enforce 1100 W of 1400 W, one of them also with two ports' trust
    off and a GPU at another value; a setting of its own (no device) on one."""
    report = Report(command="drift", started="2026-12-04T06:00:00Z", finished="2026-12-04T06:01:00Z")
    for name in ("node01", "node02", "node03"):
        changes: list[dict[str, Any]] = [
            {"setting": f"gpu_power.enforced_limit_w[GPU-{i:04d}]", "from": 1100, "to": 1400}
            for i in range(16)
        ]
        facts: dict[str, Any] = {"gpufleet_gpus": [{"uuid": f"GPU-{i:04d}"} for i in range(16)]}
        report.hosts[name] = HostReport(status="drifted", changes=changes, facts=facts)
    node03 = report.hosts["node03"]
    node03.changes[5] = {"setting": "gpu_power.enforced_limit_w[GPU-0005]", "from": 1000, "to": 1400}
    node03.changes += [{"setting": f"rdma_qos.trust[mlx5_{i}]", "from": "pcp", "to": "dscp"} for i in (3, 4)]
    node03.changes.append({"setting": "inference_service.unit_file", "from": "absent", "to": "present"})
    return report


def test_the_heat_map_has_a_column_per_setting_family_not_per_gpu() -> None:
    html = html_report.render(sixteen_gpus_drifted())
    headers = re.findall(r'<th class="setting" title="([^"]+)"', html)
    assert headers == [
        "gpu_power.enforced_limit_w: 3 nodes",
        "inference_service.unit_file: 1 node",
        "rdma_qos.trust: 1 node",
    ]
    summaries = re.findall(r"<summary>([^<]+)</summary>", html)
    assert summaries == ["16/16 GPUs 1100 → 1400"] * 2 + ["16/16 GPUs, 2 values", "2 ports pcp → dscp"]
    # each GPU's cell one click away, under its family's
    assert html.count("<li>GPU-0005: 1000 → 1400</li>") == 1
    assert html.count("<li>GPU-0015: 1100 → 1400</li>") == 3
    assert "<li>mlx5_4: pcp → dscp</li>" in html
    # a setting of its own keeps its from -> to in the cell
    own = 'title="node03 · inference_service.unit_file\nabsent → present">absent → present</td>'
    assert own in html


def test_a_report_without_changes_has_no_heat_map() -> None:
    assert 'id="heat-map"' not in html_report.render(facts_report())
    assert 'id="heat-map"' in html_report.render(drift_report())


def test_verdict_follows_the_exit_status() -> None:
    assert 'data-verdict="attention"' in html_report.render(drift_report())
    assert 'data-verdict="good"' in html_report.render(facts_report())
    refused = facts_report()
    refused.hosts["node01"].configuration_error = True
    assert 'data-verdict="config"' in html_report.render(refused)


def test_gate_card_has_readings_chart_and_coolant_limits() -> None:
    html = html_report.render(gate_report())
    card = html.split('data-host="node01" data-card>')[1].split("</article>")[0]
    assert "93.5 C" in card and "83 C" in card
    assert "gpufleet.node.thermal_gate" in card
    assert 'data-chart="node01"' in card and "<svg" in card
    assert "4.8 L/min" in card and "(≥ 8 L/min)" in card
    # a good gate node in a small fleet still shows its traces
    assert 'data-chart="node02"' in html


def test_old_report_without_burn_in_renders_without_charts() -> None:
    html = html_report.render(old_report())
    assert "<svg" not in html and "97 C" in html


def test_a_large_fleet_charts_only_the_nodes_that_need_attention() -> None:
    report = Report(command="gate", started="s", finished="f")
    for i in range(html_report.LARGE_FLEET + 10):
        blocked = i < 2
        report.hosts[f"node{i:03d}"] = HostReport(
            status="blocked" if blocked else "ok",
            checks=[check(f"thermal.gpu_temp_c[GPU-{i}]", not blocked, 90.0, 83.0, "C")],
            facts={"gpufleet_burn_in": burn_in(gpus=1, samples=5)},
        )
    html = html_report.render(report)
    assert html.count("<figure") == 2
    assert html.count("data-burn-in-summary=") == html_report.LARGE_FLEET + 8
    assert 'id="host-filter"' in html


def test_decimation_keeps_the_extremes() -> None:
    t = [float(i) for i in range(10_000)]
    y = [50.0] * 10_000
    y[4321] = 99.0
    xs, ys = html_charts.decimate(t, y)
    assert len(xs) <= html_charts.MAX_POINTS and 99.0 in ys and xs == sorted(xs)


@pytest.mark.parametrize("name", list(REPORTS))
def test_the_page_in_chromium_loads_clean_and_offline(
    pages: dict[str, tuple[str, PageFacts]], name: str
) -> None:
    _, facts = pages[name]
    assert facts.console == [] and facts.page_errors == []
    assert facts.requests == [facts.url], facts.external_requests()
    assert facts.screenshot is not None and facts.screenshot.stat().st_size > 0


def test_chromium_shows_the_drift_heat_map(pages: dict[str, tuple[str, PageFacts]]) -> None:
    _, facts = pages["drift"]
    assert facts.cells == 3 * 2
    assert "Changes: node × setting" in facts.text and "1100 → 1400" in facts.text


def test_chromium_shows_the_blocked_nodes_reading_and_burn_in(
    pages: dict[str, tuple[str, PageFacts]],
) -> None:
    _, facts = pages["gate"]
    assert facts.cells == 0
    assert "thermal.gpu_temp_c[GPU-0001]\t93.5 C\t83 C" in facts.text
    assert "needs attention" in facts.text
    chart = facts.chart("node01")
    assert chart is not None and chart.drawn, facts.charts
    _, old = pages["old"]
    assert old.charts == [] and "97 C\t90 C" in old.text


def test_chromium_shows_the_guardians_breaker_decisions_and_steps(
    pages: dict[str, tuple[str, PageFacts]],
) -> None:
    _, facts = pages["guardian"]
    assert (
        "Circuit breaker open since 2026-12-06T20:31:00Z: 1 of 1 node(s) taken out in 60 min." in facts.text
    )
    assert "leaf02\tPFC off on priority 3" in facts.text
    # node02's card: its decision and each step with its times and outcome
    assert "kept out (row_remap, xid), remediation gpu_reset" in facts.text
    assert "gpu_reset\t2026-12-06T20:31:05Z\t2026-12-06T20:33:40Z\tfailed" in facts.text
    assert "would quarantine (nvlink)" in facts.text and "fabric (roce_port_down), leaf leaf02" in facts.text


def test_an_empty_report_renders() -> None:
    html = html_report.render(Report(command="check", started="s", finished="f"))
    assert "No hosts in this report." in html and 'data-verdict="good"' in html
