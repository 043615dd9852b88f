"""catalog: the one description of gpufleet's playbooks and commands matches the playbooks themselves
and the command line."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpufleet import catalog, cli, from_events, runner
from gpufleet.commands import registry

PLAYBOOK_DIR = Path(__file__).resolve().parents[2] / "playbooks"
READ_TASKS = "tasks/read_switches.yml"


def _plays(name: str) -> list[dict[str, Any]]:
    """The playbook's plays, its imported playbooks' plays in their place."""
    plays: list[dict[str, Any]] = []
    for play in yaml.safe_load((PLAYBOOK_DIR / name).read_text(encoding="utf-8")):
        imported = play.get("ansible.builtin.import_playbook")
        plays.extend(_plays(imported) if imported else [play])
    return plays


def _reads_leaves(plays: list[dict[str, Any]]) -> bool:
    return any(
        play["hosts"] == runner.SWITCH_GROUP
        and any(t.get("ansible.builtin.import_tasks") == READ_TASKS for t in play.get("tasks", []))
        for play in plays
    )


def test_every_playbook_is_described_once() -> None:
    assert set(catalog.PLAYBOOKS) == {p.name for p in PLAYBOOK_DIR.glob("*.yml")}


@pytest.mark.parametrize("name", sorted(catalog.PLAYBOOKS))
def test_what_the_table_says_of_a_playbook_is_what_it_does(name: str) -> None:
    book, plays = catalog.PLAYBOOKS[name], _plays(name)
    assert book.reads_leaves == _reads_leaves(plays)
    assert book.runs_on_leaves == all(play["hosts"] == runner.SWITCH_GROUP for play in plays)
    # the play that reads the leaves is named as report --from-events knows it in every slice's events
    reading = [p["name"] for p in plays if p["hosts"] == runner.SWITCH_GROUP and not book.runs_on_leaves]
    assert all(play.startswith(from_events.SWITCH_READ_PLAY) for play in reading)


def test_every_command_that_runs_a_playbook_has_one_and_reports_as_it() -> None:
    parser = cli._parser()
    subcommands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    starting = {name: c.playbook for name, c in registry.COMMANDS.items() if c.playbook}
    # the commands that run without the fleet (report, breaker) run no playbook
    alone = {name for name, c in registry.COMMANDS.items() if c.alone is not None}
    assert alone == {"report", "breaker"}
    assert set(starting) == set(subcommands.choices) - alone
    for command, playbook in starting.items():
        assert catalog.PLAYBOOKS[playbook].command == ("provision" if command == "check" else command)
        assert catalog.PLAYBOOKS[playbook].command == registry.COMMANDS[command].report_name


def test_the_runner_and_the_events_read_the_table() -> None:
    reading = ["drift.yml", "drift_fix.yml", "post_maintenance.yml", "provision.yml"]
    assert sorted(runner.READS_SWITCHES) == reading
    assert sorted(runner.READ_ONLY) == ["drift.yml", "facts.yml", "watch.yml"]
    assert runner.run_limit("switch_qos.yml", "leaf01") == "leaf01"
    assert runner.run_limit("drift.yml", "node01") == "node01:leaf_switches"
    judged = {c.playbook for c in registry.COMMANDS.values() if c.judge}
    assert judged <= set(catalog.PLAYBOOKS)
    later = {p for c in registry.COMMANDS.values() for p in c.later_playbooks}
    assert later <= set(catalog.PLAYBOOKS)


INVENTORY = """
all:
  children:
    leaf_switches:
      hosts:
        leaf01: {gpufleet_switch_address: "https://127.0.0.11:8765"}
        leaf02: {gpufleet_switch_address: "https://127.0.0.12:8765"}
    gpu_nodes:
      hosts:
        node01: {ansible_host: 127.0.0.2}
        node02: {ansible_host: 127.0.0.3}
"""


@pytest.mark.parametrize(
    ("command", "limit", "held", "reached"),
    [
        # a run that reads the leaves reaches them whatever the limit, and holds only its nodes
        ("drift", "node01", {"127.0.0.2": "node01"}, 3),
        ("gate", "node01,node02", {"127.0.0.2": "node01", "127.0.0.3": "node02"}, 4),
        ("facts", "node01", {"127.0.0.2": "node01"}, 1),
        # gpufleet switch holds and reaches the leaves of its limit, not every leaf
        ("switch", "leaf01", {"https://127.0.0.11:8765": "leaf01"}, 1),
    ],
)
def test_the_preflight_holds_and_counts_what_the_run_reaches(
    tmp_path: Path, command: str, limit: str, held: dict[str, str], reached: int
) -> None:
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(INVENTORY, encoding="utf-8")
    args = argparse.Namespace(command=command, limit=limit, report_dir=tmp_path / "report", tags=None)
    got_held, got_reached, listed = cli._preflight(args, inventory, None)
    assert (got_held, got_reached) == (held, reached)
    # the listing the command is given: the hosts it reaches, with their variables
    assert set(listed["_meta"]["hostvars"]) >= set(held.values())
