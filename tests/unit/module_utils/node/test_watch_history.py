"""The watch's reading carries what a watch that acts decides from: the node's remediation history and
the drain role's record; guardian.replace_hardware is judged with node_health's checks (or alone when the
health is not judged)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ansible_collections.gpufleet.node.plugins.module_utils.node import remediation_history, watch

from tests.unit.module_utils.node.test_watch import FakeNode
from tests.unit.mutations import read_capture

MARK = {"class": "gpu_lost", "action": "replace_hardware", "outcome": "ok", "time": "2026-12-06T20:31:05Z"}


def marked(tmp_path: Path, *more: dict[str, Any]) -> str:
    path = str(tmp_path / "remediation-history.json")
    remediation_history.append(path, [dict(MARK, action="quarantine"), MARK, *more], run="r1")
    return path


def by_name(checks: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [c for c in checks if c["name"] == name]


def test_a_marked_node_s_reading_has_its_history_and_record_and_the_mark_fails(tmp_path: Path) -> None:
    record = tmp_path / "drained"
    record.write_text("gpufleet watch: health.gpu_count 7\n")
    node = FakeNode(lambda t: False)
    checks, fact = node.watch(
        history_path=marked(tmp_path), drain_record_path=str(record), node_name="node07"
    )
    assert [e["action"] for e in fact["history"]] == ["quarantine", "replace_hardware"]
    assert fact["history"][1]["run"] == "r1" and fact["history"][1]["class"] == "gpu_lost"
    assert fact["drain_record"] == "gpufleet watch: health.gpu_count 7"
    [mark] = by_name(checks, "guardian.replace_hardware")
    assert (mark["ok"], mark["value"]) == (False, "gpu_lost")
    assert 'gpufleet release --limit node07 --reason "..."' in mark["message"]
    assert "2026-12-06T20:31:05Z" in mark["message"]


def test_a_node_with_neither_file_reads_an_empty_history_no_record_and_passes(tmp_path: Path) -> None:
    checks, fact = FakeNode(lambda t: False).watch(
        history_path=str(tmp_path / "none.json"), drain_record_path=str(tmp_path / "drained")
    )
    assert fact["history"] == [] and fact["drain_record"] is None
    [mark] = by_name(checks, "guardian.replace_hardware")
    assert mark["ok"] is True


def test_a_cleared_mark_passes_and_unread_paths_leave_the_reading_null(tmp_path: Path) -> None:
    cleared = {"class": "gpu_lost", "action": "cleared", "outcome": "ok", "detail": "baseboard swapped"}
    checks, fact = FakeNode(lambda t: False).watch(history_path=marked(tmp_path, cleared))
    assert [c["ok"] for c in by_name(checks, "guardian.replace_hardware")] == [True]
    assert fact["history"][-1]["detail"] == "baseboard swapped"
    checks, fact = FakeNode(lambda t: False).watch()
    assert fact["history"] is None and fact["drain_record"] is None
    assert by_name(checks, "guardian.replace_hardware") == []


def test_a_damaged_history_is_null_in_the_reading_and_fails_the_mark_closed(tmp_path: Path) -> None:
    path = tmp_path / "h.json"
    path.write_text('{"events": [1]}')
    checks, fact = FakeNode(lambda t: False).watch(history_path=str(path))
    assert fact["history"] is None
    [mark] = by_name(checks, "guardian.replace_hardware")
    assert (mark["ok"], mark["value"]) == (False, "unread") and "fail closed" in mark["message"]


def test_with_the_health_judged_the_mark_is_node_health_s_check(tmp_path: Path) -> None:
    xml = read_capture("h200-device/nvidia-smi-q-x-idle.xml")

    def run_command(argv: list[str], **kwargs: Any) -> tuple[int, str, str]:
        assert argv == ["nvidia-smi", "-q", "-x"], argv
        return 0, xml, ""

    w = watch.Watch(run_command, "nvidia-smi", 5.0, {}, [], [], health={"nvlink": False})
    history = remediation_history.reading(marked(tmp_path), "node07")
    found, fact = w._health(w._health_start(), 5.0, history)
    assert fact is not None
    [mark] = by_name(found, "guardian.replace_hardware")
    assert mark["ok"] is False and mark["value"] == "gpu_lost"
    # the health not read: the mark is still judged beside watch.health's failure
    w = watch.Watch(
        lambda argv, **kw: (9, "", "NVIDIA-SMI has failed"),
        "nvidia-smi",
        5.0,
        {},
        [],
        [],
        health={"nvlink": False},
    )
    found, fact = w._health(w._health_start(), 5.0, history)
    assert [c["name"] for c in found] == ["watch.health", "guardian.replace_hardware"] and fact is None


def test_a_drain_record_that_cannot_be_read_is_still_a_record(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert watch.read_drain_record(str(fifo)) == f"record unreadable: not a regular file ({fifo})"
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "elsewhere")
    assert watch.read_drain_record(str(link)).startswith("record unreadable: ")
    empty = tmp_path / "empty"
    empty.write_text("")
    assert watch.read_drain_record(str(empty)) == "drained"
    assert watch.read_drain_record(str(tmp_path / "absent")) is None
    long = tmp_path / "long"
    long.write_text("gpufleet gate:\n" + "x" * 10000)
    assert len(watch.read_drain_record(str(long))) == watch.MAX_DRAIN_RECORD_BYTES
