"""Commands as objects: every gpufleet command is one Command in commands/registry.py, and the CLI's
parser, the console's judges and `report --from-events`' judges are all built from it; a command
missing from any of them fails here."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import pytest

from gpufleet import catalog, cli, events, from_events
from gpufleet.commands import base, registry
from gpufleet.report import Report

PLAYING = {name: c for name, c in registry.COMMANDS.items() if c.playbook}


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (found,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(found.choices)


def test_the_cli_has_exactly_the_registrys_commands_each_with_its_help() -> None:
    children = _subparsers(cli._parser())
    assert list(children) == list(registry.COMMANDS)
    assert {"facts", "provision", "check", "switch", "gate", "drift", "watch", "report"} <= set(children)
    for name, command in registry.COMMANDS.items():
        assert children[name].description == command.description and command.description
        # a command runs against the fleet (the CLI's straight line) or alone (report), never both
        assert (command.run is None) != (command.alone is None), name
        if command.run is not None:
            options = {o for a in children[name]._actions for o in a.option_strings}
            assert {"--inventory", "--limit", "--report-dir", "--textfile-dir", "--verbose"} <= options


@pytest.mark.parametrize("name", sorted(PLAYING))
def test_every_command_that_runs_a_playbook_is_judged_on_the_console_and_in_a_replay(name: str) -> None:
    command = PLAYING[name]
    playbook = command.playbook
    assert playbook in catalog.PLAYBOOKS
    # the command whose report a run of its playbook makes (check's is provision's) has a judge
    started = base.started_by(registry.COMMANDS, str(playbook))
    assert started is not None and started.judge is not None
    assert started.name == command.report_name
    judges = registry.console_judges()
    host = events.HostResult.from_tasks("node01", [{"task": "Read", "outcome": "ok", "changed": False}])
    read_only = catalog.PLAYBOOKS[str(playbook)].read_only or command.variant == "--check"
    # the console's status of a host is the replay's (report --from-events) judge's, for this command
    replayed = base.host_judge(registry.COMMANDS, str(playbook), read_only)
    assert replayed is not None
    assert judges.status_of(str(playbook), read_only)(host) == replayed(host).status
    for later in command.later_playbooks:
        assert later in catalog.PLAYBOOKS
        assert judges.status_of(later, False) is command.later_playbooks[later]


def test_a_playbook_no_command_judges_is_refused_by_the_replay_naming_the_ones_that_are() -> None:
    slice_ = from_events.Slice(Path("x"), "release_lock.yml", events.Collector(), "", "")
    with pytest.raises(from_events.EventsError) as refused:
        from_events.merge([slice_], registry.COMMANDS)
    for command in PLAYING.values():
        if command.judge is not None:
            assert str(command.playbook) in str(refused.value)
    # and with a command missing from the registry, its playbook is not judged
    without_gate = {n: c for n, c in registry.COMMANDS.items() if n != "gate"}
    gated = from_events.Slice(Path("x"), "post_maintenance.yml", events.Collector(), "", "")
    with pytest.raises(from_events.EventsError, match=r"post_maintenance\.yml has no gpufleet report"):
        from_events.merge([gated], without_gate)


@pytest.mark.parametrize(
    ("argv", "reported", "holds"),
    [
        (["provision"], "provision", "gpufleet provision"),
        (["provision", "--check"], "provision --check", None),
        (["check"], "provision --check", None),
        (["switch"], "switch", "gpufleet switch"),
        (["switch", "--check"], "switch --check", None),
        (["gate"], "gate", "gpufleet gate"),
        (["drift"], "drift", None),
        (["drift", "--fix"], "drift --fix", "gpufleet drift --fix"),
        (["watch"], "watch", None),
        (["facts"], "facts", None),
    ],
)
def test_each_command_says_what_its_report_names_and_the_lock_it_holds(
    argv: list[str], reported: str, holds: str | None
) -> None:
    args = cli._parser().parse_args(argv)
    command = registry.COMMANDS[args.command]
    assert command.reported_as(args) == reported
    assert command.holds_as(args) == holds


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["drift", "--max-fail-percent", "101"], "--max-fail-percent must be 0..100, got 101"),
        (["drift", "--batch", "0"], "--batch '0': use a count (5) or a percentage of the nodes (10%)"),
        (["gate", "--burn-in-seconds", "0"], "--burn-in-seconds must be between 1 and 3600, got 0"),
        (["gate", "--burn-in-seconds", "3601"], "--burn-in-seconds must be between 1 and 3600, got 3601"),
    ],
)
def test_a_commands_own_validation_is_a_usage_error_before_anything_is_read(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # the inventory does not exist: the arguments are refused before it is looked at
    assert cli.main([*argv, "-i", str(tmp_path / "nope.yml")]) == cli.EXIT_USAGE
    assert capsys.readouterr().err.strip() == f"gpufleet: error: {message}"


def test_the_extra_vars_come_from_the_commands_arguments() -> None:
    gate = cli._parser().parse_args(["gate", "--burn-in-seconds", "20"])
    assert registry.COMMANDS["gate"].extravars(gate) == {"thermal_gate_burn_in_seconds": 20}
    watch = cli._parser().parse_args(["watch", "--window", "3"])
    assert registry.COMMANDS["watch"].extravars(watch) == {"watch_window_s": 3.0}
    assert registry.COMMANDS["drift"].extravars(cli._parser().parse_args(["drift"])) == {}
    # the gate is the command that does something on cancel (stops what it started)
    assert [n for n, c in registry.COMMANDS.items() if c.on_cancel] == ["gate"]


def test_switch_without_a_limit_reaches_the_leaves() -> None:
    args = cli._parser().parse_args(["switch"])
    registry.COMMANDS["switch"].validate(args)
    assert args.limit == "leaf_switches"


def test_the_console_is_given_its_settings_not_set_on_a_shared_one() -> None:
    out = io.StringIO()
    one = registry.console(out, verbose=True, total=7)
    two = registry.console(out)
    assert (one.verbose, one.total, two.verbose, two.total) == (True, 7, False, None)
    assert one is not two and one.judges is not None


def test_a_run_the_cli_makes_is_written_once_with_what_was_asked(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The CLI's straight line: the command's run returns its report, the CLI writes it."""
    runs: list[base.Run] = []

    def run(command: base.Command, args: argparse.Namespace, given: base.Run) -> Report:
        runs.append(given)
        return Report(command=command.reported_as(args), started="t0", finished="t1")

    monkeypatch.setitem(
        registry.COMMANDS, "facts", base.Command(**{**registry.COMMANDS["facts"].__dict__, "run": run})
    )
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  children:\n    gpu_nodes:\n      hosts:\n        node01: {}\n")
    report_dir = tmp_path / "r"
    assert cli.main(["facts", "-i", str(inventory), "--report-dir", str(report_dir)]) == cli.EXIT_OK
    [given] = runs
    assert (given.inventory, given.report_dir, given.progress is not None) == (inventory, report_dir, True)
    assert given.progress is not None and given.progress.total == 1
    assert (report_dir / "report.json").is_file() and (report_dir / "report.html").is_file()
