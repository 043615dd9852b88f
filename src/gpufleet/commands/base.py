"""What a gpufleet command is (:class:`Command`), the options and the run a command is given, and what
the commands share (a run whose report still says where each host stood when a second signal stopped it).

Every command is one :class:`Command` in ``registry.COMMANDS``: the CLI builds its subparser from it and
runs it, the console (progress.Display) and ``report --from-events`` judge its hosts with its judges.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from gpufleet import events, progress, runner
from gpufleet.interrupt import Interrupt
from gpufleet.progress import Display
from gpufleet.report import HostReport, Report, now

# A host's report from its run's results, as the command's report gives it.
HostJudge = Callable[[events.HostResult], HostReport]
# What a command judges across a run's hosts before each host's own judge (drift: the odd node out).
AcrossHosts = Callable[[Mapping[str, events.HostResult]], None]


# gpufleet's exit statuses (cli.py's docstring and --help say what each means)
EXIT_OK, EXIT_NOT_OK, EXIT_USAGE = 0, 1, 2
DEFAULT_REPORT_DIR = Path("reports/latest")


class UsageError(ValueError):
    """Bad arguments or configuration: nothing was run."""


def exit_status(report: Report) -> int:
    """A report's exit status: 2 when a host was refused for its inputs (configuration), else 0 all
    good or 1."""
    if report.configuration_error():
        return EXIT_USAGE
    return EXIT_OK if report.all_ok() else EXIT_NOT_OK


@dataclass(frozen=True)
class CommonOptions(runner.Target):
    tags: str | None = None
    check: bool = False
    diff: bool = False
    # take the nodes' run locks even from another run's record (that run is gone)
    break_lock: bool = False


TargetT = TypeVar("TargetT", bound=runner.Target)


@dataclass(frozen=True)
class Run:
    """What the CLI gives a command to run: the inventory, --limit, --report-dir, the vault password
    file, and the console its runs print to (None: nothing printed)."""

    inventory: Path
    limit: str | None
    report_dir: Path
    vault_password_file: Path | None = None
    progress: Display | None = None
    # the signals the operator sends during the command (interrupt.installed in the CLI)
    interrupt: Interrupt | None = None
    # the preflight's `ansible-inventory --list` of the hosts it reaches (hostvars: the guardian's
    # settings and cabling, read without a second ansible-inventory)
    listing: Mapping[str, Any] = field(default_factory=dict)

    def target(self, kind: type[TargetT], **settings: Any) -> TargetT:
        """The options ``kind`` (runner.Target or one that extends it) of a run against this run's
        inventory, --limit, report folder and vault password file, with ``settings`` (kind's other
        fields)."""
        settings.setdefault("interrupt", self.interrupt)
        return kind(self.inventory, self.limit, self.report_dir, self.vault_password_file, **settings)


class CanceledRun(runner.Canceled):
    """runner.Canceled with the command's report of where each host stood (not written yet: the CLI
    writes it, as every report)."""

    def __init__(self, stopped: runner.Canceled, report: Report) -> None:
        super().__init__(str(stopped), stopped.hosts)
        self.report = report


# What a command does when a second signal stopped its playbook (the gate: stop the instances of the
# nodes it reached and had not passed): a note per host it did something about.
OnCancel = Callable[[CommonOptions, runner.Canceled, Display | None], dict[str, str]]


def _nothing(args: argparse.Namespace) -> None:
    """No argument of the command is checked beyond its parser."""


def _no_extravars(args: argparse.Namespace) -> dict[str, object]:
    return {}


def _never(args: argparse.Namespace) -> bool:
    return False


@dataclass(frozen=True)
class Command:
    """One `gpufleet NAME`: what its --help says, its arguments, the playbook it starts with, how its
    hosts are judged and what it does on cancel."""

    name: str
    # one line in `gpufleet --help`'s list of commands
    summary: str
    # what `gpufleet NAME --help` says first
    description: str
    # adds the command's own arguments to its subparser (the fleet's -i, -l, ... are added for it)
    add_arguments: Callable[[argparse.ArgumentParser], None]
    # runs it against the fleet: its report, not yet written (the CLI writes every report)
    run: Callable[[Command, argparse.Namespace, Run], Report] | None = None
    # runs it without the fleet (report): its exit status; given every command (the judges)
    alone: Callable[[argparse.Namespace, Mapping[str, Command]], int] | None = None
    # the playbook it starts with (catalog.PLAYBOOKS); None for a command that runs none
    playbook: str | None = None
    # whether this invocation changes nodes (it holds their run lock)
    changes: Callable[[argparse.Namespace], bool] = _never
    # its arguments checked (UsageError with the message), before anything is read
    validate: Callable[[argparse.Namespace], None] = _nothing
    # the extra vars its playbook gets from its arguments
    extravars: Callable[[argparse.Namespace], dict[str, object]] = _no_extravars
    # the command its report names (check's is provision's), and the word a variant adds to it
    reports_as: str = ""
    variant: str = ""
    variant_on: Callable[[argparse.Namespace], bool] = _never
    # how its report judges a host, in a run that changes nodes and in a check-mode run
    judge: HostJudge | None = None
    check_judge: HostJudge | None = None
    # what its report judges across a run's hosts before each host
    across_hosts: AcrossHosts | None = None
    # the status the console gives a host of the later playbooks it runs (drift --fix's batches)
    later_playbooks: Mapping[str, progress.StatusOf] = field(default_factory=dict)
    # what it does when a second signal stopped its playbook
    on_cancel: OnCancel | None = None
    # the vaulted secrets it always decrypts (the gate reads the BMCs)
    needs_secrets: bool = False

    @property
    def report_name(self) -> str:
        return self.reports_as or self.name

    def reported_as(self, args: argparse.Namespace) -> str:
        """The command its report names: 'provision --check', 'drift --fix', 'gate'."""
        return f"{self.report_name} {self.variant}" if self.variant_on(args) else self.report_name

    def holds_as(self, args: argparse.Namespace) -> str | None:
        """The run lock's name for the hosts it changes ('gpufleet drift --fix'); None: it changes none."""
        return f"gpufleet {self.reported_as(args)}" if self.changes(args) else None

    def started(self, args: argparse.Namespace, run: Run) -> Report:
        """Runs it (its report, unwritten)."""
        if self.run is None:
            raise UsageError(f"gpufleet {self.name} runs no playbook")
        return self.run(self, args, run)


def started_by(commands: Mapping[str, Command], playbook: str) -> Command | None:
    """The command whose report a run of ``playbook`` makes (check's playbook is provision's)."""
    return next(
        (c for c in commands.values() if c.playbook == playbook and c.report_name == c.name and c.judge),
        None,
    )


def host_judge(commands: Mapping[str, Command], playbook: str, check_mode: bool) -> HostJudge | None:
    """How the report of a run of ``playbook`` judges a host (its check-mode judge in check mode)."""
    command = started_by(commands, playbook)
    if command is None:
        return None
    return (command.check_judge if check_mode else None) or command.judge


def console_judges(commands: Mapping[str, Command]) -> progress.Judges:
    """What the console is given so it says of each host what the command's report will."""

    def status_of(playbook: str, read_only: bool) -> progress.StatusOf:
        judge = host_judge(commands, playbook, read_only)
        if judge is not None:
            found = judge
            return lambda host: found(host).status
        for command in commands.values():
            if playbook in command.later_playbooks:
                return command.later_playbooks[playbook]
        return progress.generic_status(read_only)

    across = {c.playbook: c.across_hosts for c in commands.values() if c.playbook and c.across_hosts}
    return progress.Judges(status_of=status_of, across_hosts=across)


def run_reported(
    report: Report,
    options: runner.RunOptions,
    display: Display | None,
    after_cancel: Callable[[runner.Canceled], dict[str, str]] | None = None,
) -> runner.RunResult:
    """runner.run_playbook; when a second signal stops it, the report still says where each host
    stands (interrupted, at which task, left drained, and what ``after_cancel`` did about it): it goes
    on to the exit with the CanceledRun, which the CLI writes."""
    try:
        return runner.run_playbook(options, progress=display)
    except runner.Canceled as exc:
        notes = after_cancel(exc) if after_cancel else {}
        for name, result in exc.hosts.items():
            # the task it was on, and the drain task that drained it (named)
            host = HostReport(status="interrupted", message=f"{exc}: {result.where_stopped()}")
            if notes.get(name):
                host.message += f"; {notes[name]}"
            report.hosts[name] = host
        report.finished = now()
        raise CanceledRun(exc, report) from exc


def reported_facts(facts: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in facts.items() if k.startswith("gpufleet_")}


def fleet_arguments(parser: argparse.ArgumentParser, default_report_dir: Path = DEFAULT_REPORT_DIR) -> None:
    """What every command that runs against the fleet takes."""
    parser.add_argument(
        "--inventory",
        "-i",
        type=Path,
        help="inventory (default: ANSIBLE_INVENTORY, else the inventory of gpufleet's ansible.cfg)",
    )
    parser.add_argument("--limit", "-l", help="Ansible host pattern to limit the run to")
    parser.add_argument("--report-dir", type=Path, default=default_report_dir, help="where reports go")
    parser.add_argument(
        "--textfile-dir",
        type=Path,
        help="also write the run's metrics there as gpufleet_<command>.prom (node_exporter's textfile "
        "collector directory, which must exist; prometheus/ holds the alerts on them)",
    )
    parser.add_argument(
        "--vault-password-file",
        type=Path,
        help="the file (or a script printing it) holding the password of the inventory's vaulted values, "
        "such as the BMC passwords (default: ANSIBLE_VAULT_PASSWORD_FILE)",
    )
    parser.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        help="a line per host and task (default: a live progress line on a terminal, else a line per host)",
    )


BREAK_LOCK_HELP = (
    "take the nodes even when another run's lock is on them (the run it names is gone: killed, its "
    "controller down); without it such a node is refused, naming that run"
)
TAGS_HELP = "only these roles (comma-separated role names)"
CHECK_HELP = "report what would change; change nothing"
