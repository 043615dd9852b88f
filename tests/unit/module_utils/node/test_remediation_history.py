"""The node's remediation history: read (missing, damaged, not a file), append (validated, timed,
bounded, atomic, 0644), the replace-hardware mark and its check."""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.node import remediation_history as rh


def event(action: str = "quarantine", klass: str = "row_remap", **more: Any) -> dict[str, Any]:
    return {"class": klass, "action": action, "outcome": "ok", **more}


def test_a_missing_history_is_empty_and_the_first_append_makes_it(tmp_path: Path) -> None:
    path = tmp_path / "lib" / "gpufleet" / "remediation-history.json"
    assert rh.read(str(path)) == []
    history = rh.append(str(path), [event(checks=["health.row_remap_pending[GPU-1]"])], run="r1")
    assert len(history) == 1
    stored = json.loads(path.read_text())
    assert stored == {"events": history}
    first = stored["events"][0]
    assert first["run"] == "r1" and first["checks"] == ["health.row_remap_pending[GPU-1]"]
    assert first["detail"] == "" and first["class"] == "row_remap"
    assert first["time"].endswith("Z") and len(first["time"]) == 20
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert stat.S_IMODE(path.parent.stat().st_mode) & 0o022 == 0
    # nothing left beside it (the temporary file was renamed)
    assert sorted(p.name for p in path.parent.iterdir()) == ["remediation-history.json"]


def test_append_keeps_order_the_given_time_and_run_and_only_the_newest(tmp_path: Path) -> None:
    path = str(tmp_path / "h.json")
    rh.append(path, [event(time="2026-12-01T00:00:00Z", run="old")], run="ignored")
    history = rh.append(
        path, [event("gpu_reset"), event("gate_failed")], run="r2", when="2026-12-06T20:31:05Z"
    )
    assert [(e["action"], e["time"], e["run"]) for e in history] == [
        ("quarantine", "2026-12-01T00:00:00Z", "old"),
        ("gpu_reset", "2026-12-06T20:31:05Z", "r2"),
        ("gate_failed", "2026-12-06T20:31:05Z", "r2"),
    ]
    many = [event(detail=f"n{i}") for i in range(rh.MAX_EVENTS + 5)]
    history = rh.append(path, many)
    assert len(history) == rh.MAX_EVENTS == len(rh.read(path))
    assert history[-1]["detail"] == f"n{rh.MAX_EVENTS + 4}"
    assert history[0]["detail"] == "n5"  # 3 + 205 events: the 3 older and n0..n4 dropped


def test_the_detail_is_kept_on_one_printable_line(tmp_path: Path) -> None:
    path = str(tmp_path / "h.json")
    history = rh.append(path, [event(detail="GPU 3\nreplaced \x1b[31m RMA")])
    assert history[-1]["detail"] == "GPU 3 replaced ?[31m RMA"


@pytest.mark.parametrize(
    ("bad", "named"),
    [
        ({"action": "quarantine", "outcome": "ok"}, "events[0].class must be a failure class"),
        (event(klass="Row Remap"), "events[0].class must be a failure class"),
        (event("undrain"), "events[0].action must be one of quarantine, gpu_reset"),
        (dict(event(), outcome="maybe"), "events[0].outcome must be one of ok, failed"),
        (event(time="yesterday"), "events[0].time must be an ISO UTC time"),
        (event(checks="health.xid"), "events[0].checks must be a list"),
        (event(checks=["a\nb"]), "events[0].checks: each must be a check name"),
        (event(detail="x" * 501), "events[0].detail must be text of at most 500"),
        (event(node="node01"), "events[0]: unknown key(s) node"),
        ("quarantine", "events[0] must be an object"),
    ],
)
def test_a_bad_event_is_refused_naming_it_and_nothing_is_written(
    tmp_path: Path, bad: Any, named: str
) -> None:
    path = tmp_path / "h.json"
    with pytest.raises(ValueError, match=None) as raised:
        rh.append(str(path), [event(), bad])
    assert named.replace("events[0]", "events[1]") in str(raised.value)
    assert not path.exists()


def test_every_fault_is_named_at_once() -> None:
    with pytest.raises(ValueError) as raised:
        rh.new_events([{"class": "X", "action": "reset", "outcome": "?"}])
    assert str(raised.value).count("events[0]") == 3
    with pytest.raises(ValueError, match="non-empty list"):
        rh.new_events([])


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("{not json", "is not JSON"),
        ("[]", 'is not a remediation history ({"events": [...]})'),
        ('{"events": {}}', "is not a remediation history"),
        ('{"events": [{"class": "xid", "action": "quarantine", "outcome": "ok"}]}', "events[0] has no time"),
        (
            '{"events": [{"class": "xid", "action": "explode", "outcome": "ok", "time": "x"}]}',
            "events[0].action",
        ),
    ],
)
def test_a_damaged_history_is_an_error_naming_the_file_and_is_never_overwritten(
    tmp_path: Path, text: str, named: str
) -> None:
    path = tmp_path / "h.json"
    path.write_text(text)
    with pytest.raises(rh.HistoryError) as raised:
        rh.read(str(path))
    assert str(path) in str(raised.value) and named in str(raised.value)
    with pytest.raises(rh.HistoryError):
        rh.append(str(path), [event()])
    assert path.read_text() == text


def test_what_is_not_a_regular_file_is_refused_without_waiting(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    with pytest.raises(rh.HistoryError, match="is not a regular file"):
        rh.read(str(fifo))
    target = tmp_path / "elsewhere.json"
    target.write_text('{"events": []}')
    link = tmp_path / "link.json"
    link.symlink_to(target)
    with pytest.raises(rh.HistoryError, match="cannot be read"):
        rh.read(str(link))
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (rh.MAX_BYTES + 1))
    with pytest.raises(rh.HistoryError, match="more than a history's"):
        rh.read(str(big))


def test_check_mode_writes_nothing_and_returns_what_it_would_be(tmp_path: Path) -> None:
    path = tmp_path / "h.json"
    rh.append(str(path), [event()])
    before = path.read_bytes()
    history = rh.append(str(path), [event("reboot")], check_mode=True)
    assert [e["action"] for e in history] == ["quarantine", "reboot"]
    assert path.read_bytes() == before


def test_concurrent_appends_lose_no_event(tmp_path: Path) -> None:
    path = str(tmp_path / "h.json")

    def add(i: int) -> None:
        for j in range(5):
            rh.append(path, [event(detail=f"{i}-{j}")])

    threads = [threading.Thread(target=add, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(e["detail"] for e in rh.read(path)) == sorted(
        f"{i}-{j}" for i in range(4) for j in range(5)
    )


def test_the_replace_hardware_mark_is_the_latest_with_no_later_cleared() -> None:
    mark = event("replace_hardware", time="2026-12-06T20:31:05Z")
    assert rh.replace_hardware_pending([]) is None
    assert rh.replace_hardware_pending([event(), mark, event("gate_failed")]) is mark
    assert rh.replace_hardware_pending([mark, event("cleared")]) is None
    again = event("replace_hardware", klass="gpu_lost")
    assert rh.replace_hardware_pending([mark, event("cleared"), again]) is again
    assert rh.replace_hardware_pending([event("cleared"), mark]) is mark


def test_the_check_fails_on_a_mark_naming_class_time_and_the_release(tmp_path: Path) -> None:
    path = tmp_path / "h.json"
    rh.append(str(path), [event("replace_hardware", detail="2 resets in 168 h", time="2026-12-06T20:31:05Z")])
    found = rh.replace_hardware_check(rh.reading(str(path), "node07"))
    assert found["name"] == "guardian.replace_hardware" and found["ok"] is False
    assert found["value"] == "row_remap" and found["limit"] == "no replace-hardware mark"
    for said in (
        "row_remap",
        "2026-12-06T20:31:05Z",
        "2 resets in 168 h",
        'gpufleet release --limit node07 --reason "..."',
    ):
        assert said in found["message"]
    rh.append(str(path), [event("cleared", detail="GPU replaced")])
    cleared = rh.replace_hardware_check(rh.reading(str(path), "node07"))
    assert cleared["ok"] is True and cleared["value"] is None
    assert rh.replace_hardware_check(rh.reading(str(tmp_path / "none.json")))["ok"] is True


def test_an_unreadable_history_fails_the_check_closed(tmp_path: Path) -> None:
    path = tmp_path / "h.json"
    path.write_text("garbage")
    reading = rh.reading(str(path), "node07")
    assert reading["events"] is None and "is not JSON" in reading["error"]
    found = rh.replace_hardware_check(reading)
    assert found["ok"] is False and found["value"] == "unread"
    assert "fail closed" in found["message"] and str(path) in found["message"]
