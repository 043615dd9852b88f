"""prometheus/gpufleet-alerts.yml: promtool accepts it, its unit tests pass and cover every alert,
and it asks only for series prom.py writes."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpufleet import prom

PROMETHEUS = Path(__file__).resolve().parents[2] / "prometheus"
RULES = PROMETHEUS / "gpufleet-alerts.yml"
TESTS = sorted((PROMETHEUS / "tests").glob("*.yml"))


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool is missing: `make setup` installs it (Debian's prometheus package)")
    return subprocess.run([path, *args], capture_output=True, text=True, check=False, cwd=PROMETHEUS)


def rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def test_promtool_checks_the_rules() -> None:
    done = promtool("check", "rules", str(RULES))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(rules())} rules found" in done.stdout


def test_promtool_unit_tests_pass() -> None:
    assert TESTS
    done = promtool("test", "rules", *map(str, TESTS))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("SUCCESS") == len(TESTS)


def _tested() -> dict[str, set[bool]]:
    """alertname -> whether its tests expect it to fire, not to fire, or both."""
    seen: dict[str, set[bool]] = {}
    for path in TESTS:
        for test in yaml.safe_load(path.read_text())["tests"]:
            for case in test.get("alert_rule_test", []):
                seen.setdefault(case["alertname"], set()).add(bool(case.get("exp_alerts")))
    return seen


def test_every_alert_is_tested_firing_and_not_firing() -> None:
    alerts = {rule["alert"] for rule in rules() if "alert" in rule}
    tested = _tested()
    assert alerts == set(tested)
    assert {name for name, outcomes in tested.items() if outcomes != {True, False}} == set()


def test_every_firing_case_names_its_labels_and_annotations() -> None:
    for path in TESTS:
        for test in yaml.safe_load(path.read_text())["tests"]:
            for case in test.get("alert_rule_test", []):
                for alert in case.get("exp_alerts") or []:
                    assert {"severity", "command"} <= set(alert["exp_labels"]), (path, case)
                    assert set(alert["exp_annotations"]) == {"summary", "description"}, (path, case)


def test_every_alert_has_a_severity_and_tells_what_to_do() -> None:
    for rule in rules():
        if "alert" in rule:
            assert rule["labels"]["severity"] in ("warning", "critical"), rule["alert"]
            assert set(rule["annotations"]) == {"summary", "description"}, rule["alert"]
            # what to do next: a gpufleet command, or what to check by hand
            description = rule["annotations"]["description"]
            assert "`gpufleet " in description or "Check " in description, rule["alert"]


def test_rules_read_only_series_prom_writes() -> None:
    used = {name for rule in rules() for name in re.findall(r"\bgpufleet_[a-z_]+", rule["expr"])}
    assert used
    assert used <= set(prom.METRICS), used - set(prom.METRICS)


def dashboard_queries() -> list[str]:
    """The Grafana dashboard's queries, its $host variable as "All" (Grafana's allValue, .*)."""
    dashboard = json.loads((PROMETHEUS / "grafana-dashboard.json").read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    return [expr.replace("$host", ".*") for expr in exprs]


def test_dashboard_reads_only_series_prom_and_the_rules_write(tmp_path: Path) -> None:
    queries = dashboard_queries()
    assert queries
    used = {name for expr in queries for name in re.findall(r"\bgpufleet_[a-z_]+", expr)}
    assert used <= set(prom.METRICS), used - set(prom.METRICS)
    recorded = {rule["record"] for rule in rules() if "record" in rule}
    assert {name for expr in queries for name in re.findall(r"\bgpufleet:[a-z_0-9:]+", expr)} <= recorded
    # PromQL that parses: each query as a recording rule
    exprs = [{"record": f"dashboard:q{i}", "expr": q} for i, q in enumerate(queries)]
    path = tmp_path / "dashboard-queries.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": exprs}]}))
    done = promtool("check", "rules", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
