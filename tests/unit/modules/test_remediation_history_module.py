"""gpufleet.node.remediation_history: read and append the node's history; a bad event is refused as
input (nothing written), a damaged file fails naming it, check mode writes nothing."""

from __future__ import annotations

import json
from pathlib import Path

from ansible_collections.gpufleet.node.plugins.modules import remediation_history

from tests.unit.modules import harness

MARK = {"class": "row_remap", "action": "replace_hardware", "outcome": "ok", "detail": "2 resets in 168 h"}


def test_read_of_a_missing_history_is_empty(tmp_path: Path) -> None:
    run = harness.run_module(
        remediation_history.main, {"path": str(tmp_path / "h.json")}, expect=harness.ExitJson
    )
    assert run.result["changed"] is False
    assert run.result["history"] == [] and run.result["replace_hardware"] is None


def test_append_then_read_returns_the_mark_until_cleared(tmp_path: Path) -> None:
    path = str(tmp_path / "h.json")
    run = harness.run_module(
        remediation_history.main,
        {"path": path, "state": "append", "events": [MARK], "run": "run-1"},
        expect=harness.ExitJson,
    )
    assert run.result["changed"] is True
    added = run.result["added"][0]
    assert added["run"] == "run-1" and added["time"].endswith("Z")
    assert run.result["replace_hardware"] == added
    read = harness.run_module(remediation_history.main, {"path": path}, expect=harness.ExitJson)
    assert read.result["history"] == [added] and read.result["replace_hardware"] == added
    cleared = {"class": "row_remap", "action": "cleared", "outcome": "ok", "detail": "GPU replaced"}
    run = harness.run_module(
        remediation_history.main,
        {"path": path, "state": "append", "events": [cleared]},
        expect=harness.ExitJson,
    )
    assert run.result["replace_hardware"] is None
    assert [e["action"] for e in json.loads(Path(path).read_text())["events"]] == [
        "replace_hardware",
        "cleared",
    ]


def test_check_mode_reports_the_change_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "h.json"
    run = harness.run_module(
        remediation_history.main,
        {"path": str(path), "state": "append", "events": [MARK]},
        check_mode=True,
        expect=harness.ExitJson,
    )
    assert run.result["changed"] is True and run.result["history"][0]["action"] == "replace_hardware"
    assert not path.exists()


def test_a_bad_event_is_refused_as_input_and_nothing_is_written(tmp_path: Path) -> None:
    path = tmp_path / "h.json"
    run = harness.run_module(
        remediation_history.main,
        {"path": str(path), "state": "append", "events": [dict(MARK, action="explode", colour="red")]},
        expect=harness.FailJson,
    )
    assert run.result["input_error"] is True
    assert "events[0].action must be one of" in run.result["msg"]
    assert "unknown key(s) colour" in run.result["msg"]
    assert not path.exists()
    run = harness.run_module(
        remediation_history.main, {"path": str(path), "state": "append"}, expect=harness.FailJson
    )
    assert run.result["input_error"] is True and "non-empty list" in run.result["msg"]


def test_a_damaged_history_fails_naming_it_and_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "h.json"
    path.write_text('{"events": "none"}')
    for args in ({"path": str(path)}, {"path": str(path), "state": "append", "events": [MARK]}):
        run = harness.run_module(remediation_history.main, args, expect=harness.FailJson)
        assert str(path) in run.result["msg"] and "is not a remediation history" in run.result["msg"]
        assert not run.result.get("input_error")
    assert path.read_text() == '{"events": "none"}'
