"""progress.Display: a live line and the failing hosts on a terminal, one line per host result without
one, a line per host and task with --verbose. Fed the events a run sends, in their order."""

from __future__ import annotations

import io
import re
from typing import Any

import pytest

from gpufleet import events, runner
from gpufleet.commands import registry
from gpufleet.progress import Display

NODES = [f"node{i:02d}" for i in range(1, 7)]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """The live line is cut to the terminal's width (shutil.get_terminal_size reads COLUMNS first)."""
    monkeypatch.setenv("COLUMNS", "300")


def _result(
    kind: str, host: str, res: dict[str, Any], task: str = "Compare", uuid: str = "t2"
) -> dict[str, Any]:
    data = {"host": host, "task": task, "task_uuid": uuid, "play": "Compare every role", "res": res}
    return {"event": kind, "event_data": data}


def _run(display: Display) -> events.Collector:
    """A drift of six nodes through runner's event handler: node02 drifts, node03 fails, node04 is
    lost, node05 says it changed (a read-only drift changed nothing: drifted, as its report says),
    node01 and node06 are clean; a skipped task on each first."""
    handler = runner._Events(display, "drift.yml", read_only=True)
    handler({"event": "playbook_on_start", "event_data": {}})
    handler({"event": "playbook_on_play_start", "event_data": {"play": "Compare every role"}})
    handler({"event": "playbook_on_task_start", "event_data": {"task": "Skip", "task_uuid": "t1"}})
    for name in NODES:
        handler(_result("runner_on_skipped", name, {}, task="Skip", uuid="t1"))
    handler({"event": "playbook_on_task_start", "event_data": {"task": "Compare", "task_uuid": "t2"}})
    found = {
        "node02": ("runner_on_ok", {"changes": [{"setting": "a", "from": 1, "to": 2}] * 3, "checks": []}),
        "node03": ("runner_on_failed", {"msg": "rdma_qos: no port"}),
        "node04": ("runner_on_unreachable", {"msg": "Failed to connect to the host via ssh"}),
        "node05": ("runner_on_ok", {"changed": True, "changes": [{"setting": "a", "from": 1, "to": 2}]}),
    }
    for name in NODES:
        kind, res = found.get(name, ("runner_on_ok", {"changes": [], "checks": [{"ok": True}]}))
        handler(_result(kind, name, res))
    handler({"event": "playbook_on_stats", "event_data": {"ok": dict.fromkeys(NODES, 1)}})
    display.run_finished(handler.collector)
    return handler.collector


def test_without_a_terminal_each_host_result_is_one_line() -> None:
    out = io.StringIO()
    _run(Display(out))
    lines = out.getvalue().splitlines()
    assert sorted(line.split()[0] for line in lines) == NODES  # one line per host, no task lines
    by_host = {line.split()[0]: line for line in lines}
    assert by_host["node02"].split()[1:] == ["drifted", "3", "settings"]
    assert by_host["node03"].split(None, 2)[1:] == ["failed", "Compare: rdma_qos: no port"]
    assert "became unreachable at 'Compare': Failed to connect" in by_host["node04"]
    assert by_host["node05"].split()[1] == "drifted" and by_host["node01"].split()[1:] == ["ok"]
    # the hosts that failed come first, as they fail; the rest when the run ends
    assert [line.split()[0] for line in lines[:2]] == ["node03", "node04"]
    assert "\r" not in out.getvalue()


def test_on_a_terminal_a_live_line_and_only_the_failing_hosts() -> None:
    out = Terminal()
    display = Display(out)
    display.total = 6
    _run(display)
    text = out.getvalue()
    printed = [line.split("\x1b[K")[-1] for line in text.split("\n") if line.strip()]
    hosts_named = [line.split()[0] for line in printed[:-1]]
    assert hosts_named == ["node03", "node04"]  # the failing hosts, each once; no per-task or ok host line
    assert re.fullmatch(
        r"drift.yml: 6 hosts in 0:\d\d: 2 ok, 2 drifted, 1 failed, 1 unreachable", printed[-1]
    )
    # the live line: the play, hosts through its task of the total, the counts so far
    assert re.search(
        r"\r\x1b\[Kdrift.yml: play 1 'Compare every role' \| \d/6 hosts through 'Compare' \|", text
    )
    assert "\r\x1b[K" in text  # the live line was redrawn in place


@pytest.mark.parametrize(
    ("res", "line"),
    [
        ({"changes": [{"setting": "a"}] * 3, "checks": []}, "drifted     Compare: 3 settings"),
        ({"changes": [], "checks": [{"ok": True}]}, "ok          Compare"),
        (
            {"changes": [{"setting": "a"}], "checks": [{"ok": False}, {"ok": True}]},
            "drifted     Compare: 1 setting, 1 failed check",
        ),
        ({"changed": True, "changes": [{"setting": "a"}] * 2}, "changed     Compare: 2 settings"),
    ],
)
def test_verbose_prints_a_line_per_host_and_task(res: dict[str, Any], line: str) -> None:
    out = io.StringIO()
    display = Display(out, verbose=True)
    handler = runner._Events(display, "drift.yml")
    handler(_result("runner_on_ok", "node01", res))
    handler(_result("runner_on_skipped", "node01", {}))
    assert out.getvalue().splitlines() == [f"{'node01':<16} {line}"]


def test_a_loop_that_failed_names_its_items_not_ansibles_summary() -> None:
    out = io.StringIO()
    handler = runner._Events(Display(out, verbose=True), "post_maintenance.yml")
    looped = {
        "msg": "One or more items failed",
        "results": [
            {"item": "glm52", "msg": "ok"},
            {"item": "kimik3", "exception": "x", "msg": "hit rate 0.07"},
        ],
    }
    handler(_result("runner_on_failed", "node01", looped))
    assert out.getvalue().splitlines() == [f"{'node01':<16} failed      Compare: kimik3: hit rate 0.07"]


def test_gpufleets_own_lines_go_above_the_live_line() -> None:
    out = Terminal()
    display = Display(out, judges=registry.console_judges())
    display.run_started("drift_fix.yml")
    display.event({"event": "playbook_on_play_start", "event_data": {"play": "Fix"}}, None, {})
    display("drift --fix: batch 1/2: node01")
    text = out.getvalue()
    assert "\r\x1b[Kdrift --fix: batch 1/2: node01\n" in text
    assert re.search(
        r"\r\x1b\[Kdrift_fix.yml: play 1 'Fix' \| 0 hosts \| 0 changed, 0 failed, 0 unreachable \| 0:\d\d$",
        text,
    )


def test_a_read_only_run_counts_what_it_would_change_as_drifted() -> None:
    out = io.StringIO()
    display = Display(out)
    handler = runner._Events(display, "drift.yml", read_only=True)
    handler({"event": "playbook_on_start", "event_data": {}})
    # a leaf read in check mode that would change its profile reports changed: it changed nothing
    handler(
        _result(
            "runner_on_ok", "leaf02", {"changed": True, "changes": [{"setting": "pfc", "from": 0, "to": 1}]}
        )
    )
    display.run_finished(handler.collector)
    assert out.getvalue().split() == ["leaf02", "drifted", "1", "setting"]


def test_what_a_node_says_reaches_the_console_with_its_control_characters_written_out() -> None:
    """A module's message (a forged lock record's user) and a task name with a terminal's escape codes:
    the console shows them written out, on a terminal and without one, per host and per task."""
    hostile = "held by gpufleet gate by \x1b[2J\x1b[Hroot\r\nnode02 ok\u202e"
    for stream, verbose in ((io.StringIO(), False), (io.StringIO(), True), (Terminal(), False)):
        display = Display(stream, verbose=verbose)
        handler = runner._Events(display, "provision.yml")
        handler({"event": "playbook_on_start", "event_data": {}})
        handler({"event": "playbook_on_play_start", "event_data": {"play": "Hold\x1b[5m"}})
        handler({"event": "playbook_on_task_start", "event_data": {"task": "Hold", "task_uuid": "t"}})
        handler(_result("runner_on_failed", "node01", {"msg": hostile}, task="Hold\x07", uuid="t"))
        handler({"event": "playbook_on_stats", "event_data": {"failures": {"node01": 1}}})
        display.run_finished(handler.collector)
        # the display's own: the carriage return and erase-line of its live line, nothing else
        text = stream.getvalue().replace("\r\x1b[K", "")
        assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e]", text), repr(text)
        assert "\\x1b[2J\\x1b[Hroot\\x0d\\x0anode02 ok\\u202e" in text, repr(text)
