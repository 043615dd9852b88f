"""guardian_breaker: the limit's arithmetic, admitting quarantines within it (3 of 4 with a limit of 1: one
admitted, two refused, the breaker open until a person closes it with a reason), the state surviving a
reload, and a corrupt state file named, never reset."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gpufleet import guardian_breaker, preflight
from gpufleet.guardian_breaker import (
    BreakerError,
    BreakerState,
    admit,
    close,
    limit,
    load,
    record,
    save,
    summary,
    used,
)
from gpufleet.guardian_settings import BreakerSettings

NOW = datetime(2026, 12, 6, 20, 30, tzinfo=UTC)
HOUR = timedelta(minutes=60)


@pytest.mark.parametrize(
    ("max_nodes", "percent", "serving", "expected"),
    [
        (2, 10, 4, 1),  # floor(0.4) = 0, at least 1
        (2, 10, 32, 2),  # floor(3.2) = 3, max_nodes 2 smaller
        (5, 10, 32, 3),  # floor(3.2) = 3
        (100, 10, 100, 10),
        (100, 12.5, 16, 2),  # exact: 12.5 x 16 / 100 = 2
        (100, 0, 50, 1),  # percent 0: still 1
        (0, 50, 100, 0),  # max_nodes 0: never
        (3, 100, 0, 1),  # no node serving
    ],
)
def test_limit(max_nodes: int, percent: float, serving: int, expected: int) -> None:
    assert limit(BreakerSettings(max_nodes, percent, 60), serving) == expected


def test_three_of_four_with_a_limit_of_one() -> None:
    state = BreakerState()
    lim = limit(BreakerSettings(1, 10, 60), 4)
    assert lim == 1
    admitted = []
    for node in ("gpu-01", "gpu-02", "gpu-03"):
        if admit(state, node, NOW, lim, HOUR):
            record(state, node, NOW)
            admitted.append(node)
    assert admitted == ["gpu-01"]
    assert state.open and state.opened == "2026-12-06T20:30:00Z"
    assert state.opened_why == "gpu-02 would have been the 2nd node quarantined within 60 min (limit 1)"
    assert used(state, NOW, HOUR) == 1
    # it stays open in a later run, the window passed or not
    assert not admit(state, "gpu-04", NOW + timedelta(hours=5), lim, HOUR)


def test_quarantines_recorded_earlier_in_the_window_count() -> None:
    state = BreakerState()
    record(state, "gpu-01", NOW - timedelta(minutes=50))
    record(state, "gpu-02", NOW - timedelta(minutes=70))  # outside the hour
    assert used(state, NOW, HOUR) == 1
    assert admit(state, "gpu-03", NOW, 2, HOUR)
    record(state, "gpu-03", NOW)
    assert not admit(state, "gpu-04", NOW, 2, HOUR)
    assert state.open


def test_a_limit_of_zero_admits_none() -> None:
    state = BreakerState()
    assert not admit(state, "gpu-01", NOW, 0, HOUR)
    assert state.open


def test_closed_by_a_reason_forgives_what_it_counted() -> None:
    state = BreakerState()
    record(state, "gpu-01", NOW)
    assert not admit(state, "gpu-02", NOW, 1, HOUR)
    assert close(state, "  RMA 1234 filed for gpu-01; gpu-02 and gpu-03 looked at  ", NOW + HOUR)
    assert not state.open and state.opened == "" and state.events == []
    last = state.closed_by_reason[-1]
    assert last["reason"] == "RMA 1234 filed for gpu-01; gpu-02 and gpu-03 looked at"
    assert last["opened"] == "2026-12-06T20:30:00Z" and last["forgiven"] == ["gpu-01"]
    assert last["time"] == "2026-12-06T21:30:00Z" and last["was_open"] is True
    assert admit(state, "gpu-02", NOW + HOUR, 1, HOUR)
    # closing a closed breaker still records the reason
    assert close(state, "checked", NOW + 2 * HOUR) is False


@pytest.mark.parametrize("reason", ["", "   ", "x" * 201, "two\nlines", "tab\there"])
def test_close_refuses_a_reason_out_of_range(reason: str) -> None:
    state = BreakerState(open=True, opened="2026-12-06T20:30:00Z")
    with pytest.raises(ValueError, match=r"--reason must be 1\.\.200 printable characters"):
        close(state, reason, NOW)
    assert state.open


def test_record_drops_quarantines_past_the_longest_window() -> None:
    state = BreakerState()
    record(state, "old", NOW - timedelta(days=8))
    record(state, "new", NOW)
    assert [e["node"] for e in state.events] == ["new"]


def test_state_survives_a_reload(tmp_path: Path) -> None:
    where = guardian_breaker.path(tmp_path)
    assert where == tmp_path / "guardian" / "breaker.json"
    assert load(where) == BreakerState()  # no file yet
    state = BreakerState()
    record(state, "gpu-01", NOW)
    admit(state, "gpu-02", NOW, 1, HOUR)
    save(state, where)
    again = load(where)
    assert again == state
    assert again.open and used(again, NOW, HOUR) == 1
    close(again, "looked at", NOW)
    save(again, where)
    assert load(where).closed_by_reason[-1]["reason"] == "looked at"
    assert oct(where.stat().st_mode & 0o777) == "0o644"


def test_the_state_dir_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUFLEET_STATE_DIR", str(tmp_path / "state"))
    assert guardian_breaker.path() == tmp_path / "state" / "guardian" / "breaker.json"


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("{not json", "not JSON"),
        ("[]", "not a JSON object"),
        ('{"open": "yes"}', "open is 'yes'"),
        ('{"events": {}}', "events is not a list"),
        ('{"events": [{"node": "gpu-01", "time": "when"}]}', "events[0].time is 'when'"),
        ('{"events": [{"time": "2026-12-06T20:30:00Z"}]}', "events[0].node is None"),
        ('{"opened": "soon"}', "opened is 'soon'"),
        ('{"closed_by_reason": [{"time": "2026-12-06T20:30:00Z", "reason": ""}]}', "reason is ''"),
    ],
)
def test_a_corrupt_file_is_named_never_reset(tmp_path: Path, text: str, why: str) -> None:
    where = guardian_breaker.path(tmp_path)
    where.parent.mkdir(parents=True)
    where.write_text(text)
    with pytest.raises(BreakerError) as refused:
        load(where)
    message = str(refused.value)
    assert str(where) in message and why in message
    assert "never resets it on its own" in message and "move it aside" in message
    assert isinstance(refused.value, preflight.ConfigError)  # exit 2
    assert where.read_text() == text


def test_summary_for_the_report() -> None:
    state = BreakerState()
    record(state, "gpu-01", NOW - timedelta(minutes=10))
    assert summary(state, BreakerSettings(2, 10, 60), 2, NOW) == {
        "open": False,
        "limit": 2,
        "used": 1,
        "window_min": 60,
        "opened": "",
    }


def test_held_serialises_and_save_writes_json(tmp_path: Path) -> None:
    where = guardian_breaker.path(tmp_path)
    with guardian_breaker.held(where):
        state = load(where)
        record(state, "gpu-01", NOW)
        save(state, where)
    assert json.loads(where.read_text())["events"] == [{"time": "2026-12-06T20:30:00Z", "node": "gpu-01"}]
    assert (where.parent / "breaker.json.lock").exists()
