"""gpufleet.prom's series of a watch that acts (issue 39, docs/guardian.md): the nodes gpufleet holds out
and why, those it would have taken out, its remediations and their outcome, the nodes to replace, the
circuit breaker and the leaves that explain failures. A plain watch's file has none of them."""

from __future__ import annotations

from typing import Any

from gpufleet import prom
from gpufleet.report import HostReport, Report
from tests.unit.test_prom import WATCH, L, check_metrics, parsed, series

GUARDIAN_SERIES = [name for name in prom.METRICS if "quarantine" in name or "guardian" in name] + [
    "gpufleet_node_remediation",
    "gpufleet_node_replace_hardware",
    "gpufleet_leaf_explains_failures",
]


def _step(step: str, outcome: str) -> dict[str, Any]:
    return {
        "step": step,
        "started": "2026-12-06T20:31:05Z",
        "finished": "2026-12-06T20:33:40Z",
        "outcome": outcome,
        "message": "",
    }


def _event(action: str, cls: str = "xid") -> dict[str, Any]:
    return {"time": "2026-12-06T20:00:00Z", "class": cls, "action": action, "outcome": "ok", "checks": []}


def acting_report(check: bool = False) -> Report:
    report = Report(command="watch --act", started="2026-12-06T20:30:00Z", finished="2026-12-06T20:40:00Z")
    report.guardian = {
        "check": check,
        "breaker": {"open": True, "limit": 1, "used": 1, "window_min": 60, "opened": "2026-12-06T20:31:00Z"},
        "leaves": {"leaf02": "PFC off on priority 3: node05 and node06 fail fabric.pause_storm"},
    }

    def host(guardian: dict[str, Any], history: list[dict[str, Any]] | None = None) -> HostReport:
        facts = {"gpufleet_watch": {**WATCH, "history": history or []}}
        return HostReport(status="failed", guardian=guardian, facts=facts)

    report.hosts["node01"] = host(
        {
            "decision": "returned",
            "classes": {"gpu_lost": ["health.gpu_count"]},
            "remediation": "reboot",
            "steps": [
                _step("quarantine", "ok"),
                _step("reboot", "ok"),
                _step("gate", "ok"),
                _step("return", "ok"),
            ],
        }
    )
    report.hosts["node02"] = host(
        {
            "decision": "kept_out",
            "classes": {
                "row_remap": ["health.row_remap_pending[GPU-b]"],
                "xid": ["health.xid[0000:1b:00.0]"],
            },
            "remediation": "gpu_reset",
            "steps": [_step("quarantine", "ok"), _step("gpu_reset", "failed"), _step("gate", "failed")],
        }
    )
    report.hosts["node03"] = host({"decision": "would_quarantine", "classes": {"nvlink": ["health.nvlink"]}})
    report.hosts["node04"] = host(
        {"decision": "replace_hardware", "classes": {"row_remap": ["health.row_remap_failure[GPU-a]"]}}
    )
    # drained by an earlier run of gpufleet, its gate failed: still held, for its history's class
    report.hosts["node05"] = host(
        {"decision": "left_alone", "classes": {}},
        [_event("quarantine", "ecc_uncorrectable"), _event("gate_failed")],
    )
    # drained by a person: not gpufleet's to hold (an earlier quarantine of its own was returned)
    report.hosts["node06"] = host({"decision": "left_alone"}, [_event("quarantine"), _event("gate_passed")])
    # replace hardware pending from an earlier run
    report.hosts["node07"] = host(
        {"decision": "left_alone"}, [_event("quarantine"), _event("replace_hardware")]
    )
    report.hosts["node08"] = host({"decision": "fabric", "leaf": "leaf02", "classes": {"roce_port_down": []}})
    report.hosts["node09"] = HostReport(status="ok", facts={"gpufleet_watch": WATCH})
    return report


def test_an_acting_watchs_file_passes_promtool_and_says_what_it_did() -> None:
    text = prom.render(acting_report())
    check_metrics(text)
    assert series(text, "gpufleet_node_quarantined", command="watch") == {
        L(host="node02", **{"class": "row_remap"}): 1.0,
        L(host="node02", **{"class": "xid"}): 1.0,
        L(host="node05", **{"class": "ecc_uncorrectable"}): 1.0,
    }
    assert series(text, "gpufleet_node_would_quarantine", command="watch") == {
        L(host="node03", **{"class": "nvlink"}): 1.0
    }
    assert series(text, "gpufleet_node_replace_hardware", command="watch") == {
        L(host="node04", **{"class": "row_remap"}): 1.0,
        L(host="node07", **{"class": "xid"}): 1.0,
    }
    assert series(text, "gpufleet_node_remediation", command="watch") == {
        L(host="node01", action="reboot", outcome="ok"): 1.0,
        L(host="node02", action="gpu_reset", outcome="failed"): 1.0,
    }
    assert series(text, "gpufleet_guardian_breaker_open") == {L(command="watch"): 1.0}
    assert series(text, "gpufleet_guardian_breaker_used") == {L(command="watch"): 1.0}
    assert series(text, "gpufleet_guardian_breaker_limit") == {L(command="watch"): 1.0}
    assert series(text, "gpufleet_leaf_explains_failures") == {L(command="watch", leaf="leaf02"): 1.0}
    for metric in GUARDIAN_SERIES:
        assert f"# HELP {metric} watch --act: " in text and f"# TYPE {metric} gauge" in text


def test_a_check_run_took_nothing_out_so_it_only_would_have() -> None:
    report = acting_report(check=True)
    report.guardian["breaker"] = {"open": False, "limit": 2, "used": 0, "window_min": 60, "opened": ""}
    text = prom.render(report)
    check_metrics(text)
    assert series(text, "gpufleet_node_would_quarantine", command="watch") == {
        L(host="node02", **{"class": "row_remap"}): 1.0,
        L(host="node02", **{"class": "xid"}): 1.0,
        L(host="node03", **{"class": "nvlink"}): 1.0,
        L(host="node04", **{"class": "row_remap"}): 1.0,
    }
    # node05's quarantine and node07's replace hardware were earlier, real runs': still held
    assert series(text, "gpufleet_node_quarantined", command="watch") == {
        L(host="node05", **{"class": "ecc_uncorrectable"}): 1.0
    }
    assert series(text, "gpufleet_node_replace_hardware", command="watch") == {
        L(host="node07", **{"class": "xid"}): 1.0
    }
    assert series(text, "gpufleet_guardian_breaker_open") == {L(command="watch"): 0.0}
    assert series(text, "gpufleet_guardian_breaker_limit") == {L(command="watch"): 2.0}


def test_a_remediation_a_stopped_run_did_not_see_end_is_stopped() -> None:
    """SIGTERM during the reboot wait: the reboot's tasks so far were ok, then the run stopped."""
    report = acting_report()
    report.hosts["node01"].guardian = {
        "decision": "kept_out",
        "classes": {"gpu_lost": ["health.gpu_count"]},
        "remediation": "reboot",
        "steps": [_step("quarantine", "ok"), _step("reboot", "ok"), _step("stopped", "stopped")],
    }
    text = prom.render(report)
    check_metrics(text)
    assert series(text, "gpufleet_node_remediation", host="node01") == {
        L(command="watch", action="reboot", outcome="stopped"): 1.0
    }
    assert series(text, "gpufleet_node_quarantined", host="node01") == {
        L(command="watch", **{"class": "gpu_lost"}): 1.0
    }


def test_a_plain_watchs_file_is_unchanged_by_a_history_on_its_nodes() -> None:
    plain = Report(command="watch", started="2026-12-06T20:30:00Z", finished="2026-12-06T20:40:00Z")
    plain.hosts["node01"] = HostReport(status="ok", facts={"gpufleet_watch": WATCH})
    text = prom.render(plain)
    plain.hosts["node01"].facts = {"gpufleet_watch": {**WATCH, "history": [_event("quarantine")]}}
    assert prom.render(plain) == text
    assert not any(metric in text for metric in GUARDIAN_SERIES)


def test_leaf_and_class_labels_are_escaped_and_read_back() -> None:
    report = acting_report()
    report.guardian["leaves"] = {'leaf"02\\\n\x1b[2J': "down"}
    report.hosts["node03"].guardian["classes"] = {'x"y': []}
    text = prom.render(report)
    check_metrics(text)
    assert "\x1b" not in text
    assert series(text, "gpufleet_leaf_explains_failures") == {
        L(command="watch", leaf='leaf"02\\\\x0a\\x1b[2J'): 1.0
    }
    assert series(text, "gpufleet_node_would_quarantine", host="node03") == {
        L(command="watch", **{"class": 'x"y'}): 1.0
    }
    # every sample once (the parser asserts no duplicate)
    assert parsed(text)
