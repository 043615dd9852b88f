"""`gpufleet report --from-events`: slices' artifact directories merged into one report, judged by the
command's own function; what does not fit is refused (exit 2) naming the directory or the host."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpufleet import cli, from_events
from gpufleet.commands import registry
from tests.json_shape import places, setter
from tests.unit.runner_artifacts import COMPARE, READ
from tests.unit.runner_artifacts import artifacts as _artifacts

DRIFTED = {
    "changes": [{"setting": "rdma_qos.pfc[mlx5_0]", "from": "00000000", "to": "00010000"}],
    "checks": [],
}
LEAF = {"changes": [], "checks": []}


def test_slices_are_merged_and_each_host_judged_as_drift_judges_it(tmp_path: Path) -> None:
    one = _artifacts(tmp_path / "one", {"leaf01": (READ, LEAF), "node01": (COMPARE, DRIFTED)})
    two = _artifacts(
        tmp_path / "two", {"leaf01": (READ, LEAF), "node02": (COMPARE, {"changes": [], "checks": []})}
    )
    report = from_events.report_of([one, two], registry.COMMANDS)
    assert report.command == "drift"
    assert {n: h.status for n, h in report.hosts.items()} == {
        "leaf01": "ok",
        "node01": "drifted",
        "node02": "ok",
    }
    assert report.hosts["node01"].changes == DRIFTED["changes"]
    assert report.started == "2026-12-04T09:00:01Z"


def test_the_cli_writes_the_report_and_exits_as_the_command_would(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one = _artifacts(tmp_path / "one", {"node01": (COMPARE, DRIFTED)})
    code = cli.main(
        ["report", "--from-events", str(one), "--report-dir", str(tmp_path / "out"), "--format", "json"]
    )
    assert code == 1
    written = json.loads((tmp_path / "out" / "report.json").read_text())
    assert written["hosts"]["node01"]["status"] == "drifted"
    assert json.loads(capsys.readouterr().out) == written


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda t: [
                _artifacts(t / "a", {"node01": (COMPARE, DRIFTED)}),
                _artifacts(t / "b", {"node01": (COMPARE, DRIFTED)}),
            ],
            "host node01 is reported by two slices",
        ),
        (
            lambda t: [
                _artifacts(t / "a", {"leaf01": (READ, LEAF)}),
                _artifacts(t / "b", {"leaf01": (READ, DRIFTED)}),
            ],
            "leaf switch leaf01 was read differently",
        ),
        (lambda t: [t], "not ansible-runner artifacts"),
        (lambda t: [t / "missing"], "not a directory"),
        (lambda t: [_artifacts(t / "a", {"node01": (COMPARE, DRIFTED)}, stats=False)], "the run did not end"),
        (
            lambda t: [
                _artifacts(t / "a", {"node01": (COMPARE, DRIFTED)}),
                _artifacts(t / "b", {"node02": (COMPARE, DRIFTED)}, playbook="/p/watch.yml"),
            ],
            "different playbooks",
        ),
        (
            lambda t: [_artifacts(t / "a", {"node01": (COMPARE, DRIFTED)}, playbook="/p/site.yml")],
            "site.yml has no gpufleet report",
        ),
    ],
    ids=[
        "host in two slices",
        "leaf read differently",
        "not artifacts",
        "missing",
        "unfinished",
        "two playbooks",
        "not gpufleet's",
    ],
)
def test_what_does_not_fit_is_refused_naming_it(
    tmp_path: Path, make: Any, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    directories = make(tmp_path)
    with pytest.raises(from_events.EventsError, match=message):
        from_events.report_of(directories, registry.COMMANDS)
    code = cli.main(
        ["report", "--from-events", *map(str, directories), "--report-dir", str(tmp_path / "out")]
    )
    assert code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "out" / "report.json").exists()


def test_a_private_data_directory_with_one_run_and_an_awx_page_of_events(tmp_path: Path) -> None:
    run = _artifacts(tmp_path / "private" / "artifacts" / "job-42", {"node01": (COMPARE, DRIFTED)})
    # AWX's API gives pages of events ({"results": [...]}); saved into job_events/ they read the same
    page = {"results": [json.loads(p.read_text()) for p in sorted((run / "job_events").glob("*.json"))]}
    awx = tmp_path / "awx" / "job_events"
    awx.mkdir(parents=True)
    (awx / "page-1.json").write_text(json.dumps(page), encoding="utf-8")
    for directory in (tmp_path / "private", tmp_path / "awx"):
        assert from_events.report_of([directory], registry.COMMANDS).hosts["node01"].status == "drifted"


def test_a_check_mode_run_is_reported_as_what_would_change(tmp_path: Path) -> None:
    """provision --check records its mode in the stats (playbooks/tasks/record_mode.yml)."""
    changed = {"changed": True, **DRIFTED}
    checked = _artifacts(
        tmp_path / "c",
        {"node01": ("Provision", changed)},
        "/p/provision.yml",
        artifact_data={"gpufleet_check_mode": True},
    )
    applied = _artifacts(tmp_path / "a", {"node01": ("Provision", changed)}, "/p/provision.yml")
    would = from_events.report_of([checked], registry.COMMANDS)
    assert (would.command, would.hosts["node01"].status) == ("provision --check", "drifted")
    done = from_events.report_of([applied], registry.COMMANDS)
    assert (done.command, done.hosts["node01"].status) == ("provision", "changed")


def _deep(levels: int) -> str:
    return "[" * levels + "]" * levels


# Events that are valid JSON, of a shape no ansible-runner or AWX event has: (event changed: the
# task result's (2) or the stats' (3), what is done to it)
HOSTILE: dict[str, tuple[int, Any]] = {
    "event_data a list": (2, setter(("event_data",), [1, 2])),
    "event_data a string": (3, setter(("event_data",), "stats")),
    "host an object": (2, setter(("event_data", "host"), {"name": "node01"})),
    "host an int": (2, setter(("event_data", "host"), 7)),
    "checks a string": (2, setter(("event_data", "res", "checks"), "all fine")),
    "changes of numbers": (2, setter(("event_data", "res", "changes"), [1, 2])),
    "a check without ok": (2, setter(("event_data", "res", "checks"), [{"name": "gpu.x"}])),
    "hints of objects": (2, setter(("event_data", "res", "hints"), [{"a": 1}])),
    "res a list": (2, setter(("event_data", "res"), [{"changes": []}])),
    "stats ok a list": (3, setter(("event_data", "ok"), ["node01"])),
    "stats ok counts of strings": (3, setter(("event_data", "ok"), {"node01": "many"})),
    "stats artifact_data a list": (3, setter(("event_data", "artifact_data"), [True])),
    "counter a word": (2, setter(("counter",), "second")),
    "created a number": (2, setter(("created",), 1.5)),
    "playbook an object": (3, setter(("event_data", "playbook"), {"path": "drift.yml"})),
    "facts a list": (2, setter(("event_data", "res", "ansible_facts"), ["gpufleet_gpus"])),
    "coolant cdus a number": (
        2,
        setter(("event_data", "res", "ansible_facts"), {"gpufleet_coolant": {"cdus": 5}}),
    ),
    "burn-in trace a number": (
        2,
        setter(("event_data", "res", "ansible_facts"), {"gpufleet_burn_in": {"gpus": [{"gpu_c": 5}]}}),
    ),
    "host with a lone surrogate": (2, setter(("event_data", "host"), "node\udc80")),
    "stats host with a lone surrogate": (3, setter(("event_data", "ok"), {"node\udc80": 1})),
    "100,000 deep": (2, None),
    "200 deep in a message": (2, setter(("event_data", "res", "msg"), json.loads(_deep(200)))),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_events_of_a_shape_no_run_makes_are_refused_naming_the_file(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _artifacts(tmp_path / "a", {"node01": (COMPARE, DRIFTED)})
    counter, change = HOSTILE[case]
    path = run / "job_events" / f"{counter}-uuid.json"
    if change is None:
        path.write_text(_deep(100_000), encoding="utf-8")
    else:
        event = json.loads(path.read_text())
        change(event)
        path.write_text(json.dumps(event), encoding="utf-8")
    with pytest.raises(from_events.EventsError, match=str(path)):
        from_events.report_of([run], registry.COMMANDS)
    code = cli.main(["report", "--from-events", str(run), "--report-dir", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2
    assert str(path) in err
    assert "Traceback" not in err
    assert not (tmp_path / "out" / "report.json").exists()
    assert not [p.name for p in (tmp_path / "out").glob("*")]  # nothing half-written, no .tmp


GATE = "/runner/project/playbooks/post_maintenance.yml"


@pytest.mark.parametrize(
    ("coolant", "named"),
    [
        ({"cdus": 7}, "gpufleet_coolant.cdus: an integer, not a list"),
        ({"connectors": [{"key": ["1", "Baseboard1"]}]}, "gpufleet_coolant.connectors[0].key: a list"),
        (["1/Baseboard1"], "gpufleet_coolant: a list, not an object"),
    ],
)
def test_a_gate_s_coolant_fact_of_another_shape_is_refused_naming_file_and_field(
    coolant: Any, named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """report.html draws the coolant loops from this fact: a traceback there left a half-written run."""
    res = {"changes": [], "checks": [], "ansible_facts": {"gpufleet_coolant": coolant}}
    run = _artifacts(tmp_path / "a", {"node01": ("Gate", res)}, GATE)
    code = cli.main(["report", "--from-events", str(run), "--report-dir", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"{run / 'job_events' / '2-uuid.json'}: event_data.res.ansible_facts.{named}" in err
    assert "Traceback" not in err
    assert not [p.name for p in (tmp_path / "out").glob("*")]


def test_a_lone_surrogate_in_a_message_is_reported_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A module's message that quoted a node's non-UTF-8 output (Python reads the byte as a lone
    surrogate, JSON carries it as \\udcff) is reported as its escape: every file is written, as UTF-8."""
    failed = {
        "name": "health.gpu_name[GPU-0]",
        "ok": False,
        "value": "H100\udcff",
        "limit": "",
        "unit": "",
        "message": "nvidia-smi printed 'H100\udcff', not a GPU name",
    }
    run = _artifacts(tmp_path / "a", {"node01": ("Gate", {"changes": [], "checks": [failed]})}, GATE)
    code = cli.main(["report", "--from-events", str(run), "--report-dir", str(tmp_path / "out")])
    assert code == 1, capsys.readouterr().err
    written = sorted(p.name for p in (tmp_path / "out").glob("*"))
    assert written == ["gpufleet.prom", "report.html", "report.json", "report.md"]
    reported = json.loads((tmp_path / "out" / "report.json").read_text("utf-8"))["hosts"]["node01"]
    assert reported["checks"][0]["message"] == "nvidia-smi printed 'H100\\udcff', not a GPU name"
    assert "udcff" in (tmp_path / "out" / "report.md").read_text("utf-8")


def test_facts_a_judge_cannot_read_are_refused_naming_the_directory_and_host(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A shape only the command's judge reads (facts' expected GPU count) is refused, not a traceback."""
    odd = {"changes": [], "checks": [], "ansible_facts": {"gpufleet_expected_gpu_count": "eight"}}
    run = _artifacts(tmp_path / "a", {"node01": ("Gather", odd)}, "/p/facts.yml")
    with pytest.raises(from_events.EventsError, match=f"{run}: host node01: results of a shape"):
        from_events.report_of([run], registry.COMMANDS)
    assert cli.main(["report", "--from-events", str(run), "--report-dir", str(tmp_path / "out")]) == 2
    assert "host node01" in capsys.readouterr().err


def test_stats_without_artifact_data_are_a_run_not_in_check_mode(tmp_path: Path) -> None:
    """ansible-runner's stats carry artifact_data null when the run set none (it was a traceback)."""
    run = _artifacts(
        tmp_path / "a", {"node01": ("Provision", {"changed": True, **DRIFTED})}, "/p/provision.yml"
    )
    stats = run / "job_events" / "3-uuid.json"
    event = json.loads(stats.read_text())
    event["event_data"]["artifact_data"] = None
    stats.write_text(json.dumps(event), encoding="utf-8")
    report = from_events.report_of([run], registry.COMMANDS)
    assert (report.command, report.hosts["node01"].status) == ("provision", "changed")


def test_any_field_of_any_event_of_another_kind_is_refused_or_the_whole_report_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each field of a gate's events (a task result with every key gpufleet reads, facts the report
    draws, the stats) replaced by a value of another kind: exit 2 with nothing written, or every file."""
    res = {
        "changed": True,
        "msg": "m",
        "changes": [{"setting": "gpu_power.enforced_limit_w[GPU-0]", "from": 1, "to": 2}],
        "checks": [{"name": "coolant.flow_lpm[1/B]", "ok": False, "value": 4.8, "limit": 8, "unit": "L/min"}],
        "hints": ["h"],
        "override": {"reason": "r"},
        "diff": {"before": "a", "after": "b"},
        "results": [{"msg": "item", "failed": True, "item": "x", "checks": []}],
        "ansible_facts": {
            "gpufleet_coolant": {
                "connectors": [{"key": "1/B", "flow_lpm": 4.8}],
                "cdus": [{"connectors": []}],
            },
            "gpufleet_gpus": [{"uuid": "GPU-0", "power": {"enforced_limit_w": 1400.0}}],
            "gpufleet_watch": {"gpus": [{"uuid": "GPU-0", "power_draw_w": 300.0}]},
        },
    }
    res["checks"][0]["message"] = "low"
    run = _artifacts(tmp_path / "run", {"node01": ("Gate", res)}, GATE)
    for path in sorted(run.glob("job_events/*.json")):
        original = path.read_text(encoding="utf-8")
        for place in places(json.loads(original)):
            for wrong in (None, 7, "text", [1], {"a": 1}):
                event = json.loads(original)
                setter(place, wrong)(event)
                path.write_text(json.dumps(event), encoding="utf-8")
                out = tmp_path / "out"
                code = cli.main(["report", "--from-events", str(run), "--report-dir", str(out)])
                written = sorted(p.name for p in out.glob("*"))
                case = f"{path.name} {place} = {wrong!r}: exit {code}, {written}"
                assert (code, written) == (2, []) or (
                    code in (0, 1) and written == ["gpufleet.prom", "report.html", "report.json", "report.md"]
                ), case
                for made in out.glob("*"):
                    made.unlink()
        path.write_text(original, encoding="utf-8")
    assert "Traceback" not in capsys.readouterr().err
