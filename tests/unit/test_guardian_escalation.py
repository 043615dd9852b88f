"""guardian_escalation: a node goes to "replace hardware" after guardian_escalate_after remediations of one
class in the window (NVSentinel's 2 in 7 days), at once for a failed row remap or Xid 64, and for a GPU
lost a second time; a replace_hardware stays until a later cleared."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from gpufleet import checks
from gpufleet.guardian_escalation import (
    escalate,
    escalate_node,
    iso,
    parse_time,
    pending_replace,
    remediations_in_window,
    xid_numbers,
)
from gpufleet.guardian_settings import GuardianSettings

NOW = datetime(2026, 12, 6, 20, 30, tzinfo=UTC)
WEEK = timedelta(hours=168)
DEFAULTS = GuardianSettings()


def event(action: str, cls: str, ago: timedelta, outcome: str = "ok") -> dict[str, Any]:
    return {
        "time": iso(NOW - ago),
        "class": cls,
        "action": action,
        "outcome": outcome,
        "checks": [],
        "detail": "",
        "run": "r1",
    }


def failed(name: str, value: Any = 1, message: str = "") -> dict[str, Any]:
    return checks.check(name, False, value, 0, "", message or f"{name} failed")


PENDING = failed("health.row_remap_pending[GPU-a]")


def test_time_round_trip() -> None:
    assert iso(NOW) == "2026-12-06T20:30:00Z"
    assert parse_time("2026-12-06T20:30:00Z") == NOW
    assert parse_time("2026-12-06T21:30:00+01:00") == NOW
    assert parse_time("yesterday") is None and parse_time(None) is None


def test_remediations_in_window_counts_resets_and_reboots_of_the_class() -> None:
    events = [
        event("quarantine", "row_remap", timedelta(days=2)),
        event("gpu_reset", "row_remap", timedelta(days=2)),
        event("reboot", "row_remap", timedelta(days=1), outcome="failed"),
        event("gpu_reset", "xid", timedelta(hours=1)),
        event("gate_failed", "row_remap", timedelta(hours=1)),
    ]
    found = remediations_in_window(events, "row_remap", NOW, WEEK)
    assert [e["action"] for e in found] == ["gpu_reset", "reboot"]


def test_two_remediations_in_seven_days_replace() -> None:
    events = [
        event("gpu_reset", "row_remap", timedelta(days=6)),
        event("gpu_reset", "row_remap", timedelta(days=1)),
    ]
    answer = escalate(events, "row_remap", [PENDING], NOW, DEFAULTS)
    assert answer.replace
    assert "2 remediations of row_remap within 168 h" in answer.why
    assert "guardian_escalate_after 2" in answer.why


def test_one_remediation_does_not_replace() -> None:
    answer = escalate(
        [event("gpu_reset", "row_remap", timedelta(days=1))], "row_remap", [PENDING], NOW, DEFAULTS
    )
    assert not answer.replace
    assert answer.why == "1 remediation of row_remap within 168 h; replace hardware after 2"


def test_old_remediations_outside_the_window_are_ignored() -> None:
    events = [
        event("gpu_reset", "row_remap", timedelta(days=8)),
        event("reboot", "row_remap", timedelta(days=30)),
        event("gpu_reset", "row_remap", timedelta(days=1)),
    ]
    assert not escalate(events, "row_remap", [PENDING], NOW, DEFAULTS).replace
    # a shorter window set in the inventory
    short = GuardianSettings(escalate_window_h=12)
    assert not escalate(events[-1:], "row_remap", [PENDING], NOW, short).replace


def test_other_classes_remediations_do_not_count() -> None:
    events = [event("gpu_reset", "xid", timedelta(days=1)), event("reboot", "gpu_lost", timedelta(days=1))]
    assert not escalate(events, "row_remap", [PENDING], NOW, DEFAULTS).replace


def test_escalate_after_setting() -> None:
    events = [event("gpu_reset", "xid", timedelta(days=d)) for d in (1, 2)]
    assert not escalate(events, "xid", [], NOW, GuardianSettings(escalate_after=3)).replace
    assert escalate(events[:1], "xid", [], NOW, GuardianSettings(escalate_after=1)).replace


def test_an_event_that_cannot_be_dated_counts() -> None:
    undated = {**event("gpu_reset", "xid", timedelta(0)), "time": "garbled"}
    assert escalate([undated, event("reboot", "xid", timedelta(days=1))], "xid", [], NOW, DEFAULTS).replace


def test_row_remap_failure_and_xid_64_at_once_go_straight_to_replace() -> None:
    # no history at all
    failure = failed("health.row_remap_failure[GPU-a]", True)
    answer = escalate([], "row_remap", [failure], NOW, DEFAULTS)
    assert answer.replace and "health.row_remap_failure[GPU-a] failed" in answer.why
    message = "GPU 0000:1b:00.0 (GPU-a): Xid 64 in the kernel log since boot (1 events); Xid 64: ..."
    xid64 = failed("health.xid[0000:1b:00.0]", 64, message)
    answer = escalate([], "xid", [xid64], NOW, DEFAULTS)
    assert answer.replace and "Xid 64" in answer.why
    # both at once: one answer, the first named
    both = escalate_node([], {"xid": ["x"], "row_remap": ["r"]}, [xid64, failure], NOW, DEFAULTS)
    assert both.replace and "Xid 64" in both.why


def test_xid_64_beside_a_worse_xid_is_found_in_the_message() -> None:
    # node_health reports the first blocking Xid as the value and lists every number in its message
    message = "GPU 0000:1b:00.0 (GPU-a): Xid 48, 64, 79 in the kernel log since boot (3 events); Xid 48: ..."
    check = failed("health.xid[0000:1b:00.0]", 48, message)
    assert xid_numbers(check) == {48, 64, 79}
    assert escalate([], "xid", [check], NOW, DEFAULTS).replace
    assert xid_numbers(failed("health.xid[x]", [63, 64])) == {63, 64}
    assert xid_numbers(failed("health.xid[x]", "64")) == {64}


def test_xid_without_64_and_a_passing_row_remap_check_do_not() -> None:
    message = "GPU 0000:1b:00.0 (GPU-a): Xid 79 in the kernel log since boot (1 events); Xid 79: ..."
    xid79 = failed("health.xid[0000:1b:00.0]", 79, message)
    passed = checks.check("health.row_remap_failure[GPU-a]", True, False, False, "", "ok")
    assert not escalate([], "xid", [xid79, passed], NOW, DEFAULTS).replace


def test_gpu_lost_twice_in_the_window_replaces() -> None:
    lost = failed("health.gpu_count", 7)
    first = escalate([], "gpu_lost", [lost], NOW, DEFAULTS)
    assert not first.replace
    history = [
        event("quarantine", "gpu_lost", timedelta(days=3)),
        event("gate_passed", "gpu_lost", timedelta(days=3)),
    ]
    second = escalate(history, "gpu_lost", [lost], NOW, DEFAULTS)
    assert second.replace and "a GPU lost a second time within 168 h" in second.why
    # outside the window: a first time again
    old = [event("quarantine", "gpu_lost", timedelta(days=9))]
    assert not escalate(old, "gpu_lost", [lost], NOW, DEFAULTS).replace
    # another class's quarantine is not a GPU lost
    assert not escalate(
        [event("quarantine", "xid", timedelta(days=1))], "gpu_lost", [lost], NOW, DEFAULTS
    ).replace


def test_escalate_node_any_class() -> None:
    events = [event("reboot", "nvlink", timedelta(days=d)) for d in (1, 2)]
    answer = escalate_node(
        events, {"xid": ["health.xid[a]"], "nvlink": ["health.nvlink[a]"]}, [], NOW, DEFAULTS
    )
    assert answer.replace and "of nvlink" in answer.why
    assert escalate_node(events, {}, [], NOW, DEFAULTS).replace is False


@pytest.mark.parametrize(
    ("actions", "pending"),
    [
        ([], False),
        (["quarantine", "replace_hardware"], True),
        (["replace_hardware", "cleared"], False),
        (["replace_hardware", "cleared", "quarantine", "replace_hardware"], True),
        (["replace_hardware", "gate_failed"], True),
    ],
)
def test_pending_replace(actions: list[str], pending: bool) -> None:
    events = [event(a, "row_remap", timedelta(hours=len(actions) - n)) for n, a in enumerate(actions)]
    found = pending_replace(events)
    assert (found is not None) == pending
    if found is not None:
        assert found["action"] == "replace_hardware"
        assert found is [e for e in events if e["action"] == "replace_hardware"][-1]
