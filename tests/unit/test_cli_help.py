"""Every command's and subcommand's --help prints and exits 0: the commands are found in the parser
itself, so a command added later is covered without touching this test."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Iterator

import pytest
from gpufleet_sim import cli as sim_cli

from gpufleet import cli


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """The argv prefix of the parser and of every subparser below it, depth first."""
    yield path
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _commands(child, (*path, name))


COMMANDS = list(_commands(cli._parser()))
SIM_COMMANDS = list(_commands(sim_cli._parser()))


def test_the_parser_is_walked_to_its_subcommands() -> None:
    """The walk reaches every program's commands (a broken walk would test only the top)."""
    assert {("drift",), ("report",), ("gate",)} <= set(COMMANDS)
    assert {("fault",), ("up",), ("demo",), ("env",)} <= set(SIM_COMMANDS)


PROGRAMS = {"gpufleet": cli.main, "gpufleet-sim": sim_cli.main}
EVERY = [("gpufleet", argv) for argv in COMMANDS] + [("gpufleet-sim", argv) for argv in SIM_COMMANDS]


@pytest.mark.parametrize(("program", "argv"), EVERY, ids=lambda x: x if isinstance(x, str) else " ".join(x))
def test_help_exits_0_and_prints_usage(
    program: str, argv: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        PROGRAMS[program]([*argv, "--help"])
    assert exited.value.code == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"usage: {program} {' '.join(argv)}".rstrip())
    assert err == ""


def test_every_subcommand_says_what_it_does() -> None:
    """`gpufleet COMMAND --help` (and `gpufleet-sim COMMAND --help`) starts with a description of the
    command, not only its usage; the list in the program's --help has its one line too."""
    for parser in (cli._parser(), sim_cli._parser()):
        (subparsers,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        helps = {a.dest: a.help for a in subparsers._choices_actions}
        assert len(subparsers.choices) >= 7
        missing = [name for name, child in subparsers.choices.items() if not child.description]
        assert missing == [], f"{parser.prog}: no description for {missing}"
        assert [name for name in subparsers.choices if not helps.get(name)] == []


def test_the_top_level_help_tells_an_operator_what_to_run_and_what_exit_codes_mean() -> None:
    """As an operator runs it: a process, no traceback on stderr."""
    done = subprocess.run(
        [sys.executable, "-m", "gpufleet.cli", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    for words in ("gpufleet provision -i INVENTORY", "gpufleet drift", "gpufleet gate", "exit status:"):
        assert words in done.stdout
    assert "2  refused before anything changed: bad arguments or configuration" in done.stdout
    assert "only here" not in done.stdout  # the code's own docstring is not the operator's help
