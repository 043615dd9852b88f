"""`gpufleet`: one command for the fleet. Errors become exit codes here and only here:
0 all good, 1 a host blocked, drifted, failed or was unreachable, 2 refused before anything changed
(usage, configuration, or the hosts held by another run: the controller's lock or a node's)."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Any

from gpufleet import catalog, interrupt, markdown_report, preflight, prom, report_files, runlock, runner
from gpufleet import report as report_mod
from gpufleet.commands import base, registry
from gpufleet.printable import printable
from gpufleet.report import Report

EXIT_OK, EXIT_NOT_OK, EXIT_USAGE = base.EXIT_OK, base.EXIT_NOT_OK, base.EXIT_USAGE
DEFAULT_REPORT_DIR = base.DEFAULT_REPORT_DIR

# What `gpufleet --help` tells an operator (the module docstring is for who reads the code).
DESCRIPTION = """\
Bring GPU nodes and their leaf switches to the settings their Ansible roles describe, admit a node
back to service after maintenance, and say per host what was found and done.

typical use:
  gpufleet check -i INVENTORY              what provision would change (changes nothing)
  gpufleet provision -i INVENTORY          apply every role to every node
  gpufleet drift -i INVENTORY [--fix]      which nodes differ from their roles; --fix rolls them out
  gpufleet switch -i INVENTORY             the leaf switches' lossless RoCE profile
  gpufleet gate -i INVENTORY -l NODE       after maintenance: admit the node, or keep it out of service
  gpufleet watch -i INVENTORY              read-only look at nodes in service (for a schedule)
  gpufleet report --report-dir DIR         print a report again

Without -i the inventory is ANSIBLE_INVENTORY's, else the one gpufleet's ansible.cfg names.
A simulated fleet to try it on: gpufleet-sim up (gpufleet-sim demo shows it all).
Every command writes report.json, report.md, report.html and gpufleet.prom into --report-dir
(default reports/latest). 'gpufleet COMMAND --help' lists a command's options."""

EPILOG = """\
exit status:
  0  every host is ok (or changed as asked)
  1  a host was blocked, drifted, failed or could not be reached: the report names it and why
  2  refused before anything changed: bad arguments or configuration (the message names the
     setting), or another run holds the hosts (the controller's lock or a node's: the message
     names that run, --break-lock takes a node whose run is gone)"""


UsageError = base.UsageError


def _parser() -> argparse.ArgumentParser:
    """Every command's subparser, from the registry: its summary, description and arguments."""
    parser = argparse.ArgumentParser(
        prog="gpufleet",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for command in registry.COMMANDS.values():
        child = sub.add_parser(command.name, help=command.summary, description=command.description)
        if command.run is not None:
            base.fleet_arguments(child, DEFAULT_REPORT_DIR)
        command.add_arguments(child)
    return parser


def _vault_file(given: Path | None) -> Path | None:
    """An explicit file wins, then ANSIBLE_VAULT_PASSWORD_FILE."""
    given = preflight.vault_file(given)
    if given is not None:
        preflight.vault_file_usable(given)
    return given


def _preflight(
    args: argparse.Namespace, inventory: Path, vault: Path | None
) -> tuple[dict[str, str], int, dict[str, Any]]:
    """Configuration errors, found before the first play (nothing drained, nothing changed); the
    hosts the run holds (its lock), how many hosts it reaches (the leaves it reads too), and the
    inventory's listing of them."""
    command = registry.COMMANDS[args.command]
    playbook = command.playbook
    if playbook is None:
        raise UsageError(f"gpufleet {command.name} runs no playbook")
    preflight.report_dir(args.report_dir)
    if getattr(args, "textfile_dir", None) is not None:
        # the file is named after the command its report names (check's is provision's)
        textfile = prom.textfile_name(Report(command=command.report_name, started=""))
        preflight.report_dir(args.textfile_dir, "--textfile-dir", create=False, files=(textfile,))
    listed = preflight.read_inventory(inventory, args.limit)
    preflight.run_on(listed, playbook, inventory, args.limit)
    reached_limit = runner.run_limit(playbook, args.limit)
    if reached_limit != args.limit:
        # the run reads the leaves whatever the limit (runner.run_limit): their secrets must decrypt too
        listed = preflight.read_inventory(inventory, reached_limit)
    # The gate reads the BMCs with their vaulted passwords, and the commands that read or change the
    # leaf switches decrypt theirs; otherwise a secret is needed only to decrypt what is used, but one
    # given must fit.
    reads_switches = catalog.PLAYBOOKS[playbook].needs_leaf_secrets and bool(
        preflight.group_members(listed, runner.SWITCH_GROUP)
    )
    if command.needs_secrets or reads_switches or vault is not None:
        preflight.vault_secrets(listed, vault)
    if catalog.PLAYBOOKS[playbook].reads_leaves:
        preflight.cabling_leaves(listed)
    if getattr(args, "tags", None):
        preflight.tags("provision.yml", args.tags)
    held = preflight.hosts(listed)
    reached = len(held)
    if not catalog.PLAYBOOKS[playbook].runs_on_leaves:
        # the other commands only read the leaves: two gates on different nodes share them
        leaves = preflight.group_members(listed, runner.SWITCH_GROUP)
        held = {address: name for address, name in held.items() if name not in leaves}
    return held, reached, listed


def _finish(args: argparse.Namespace, report: Report) -> int:
    """A run's report printed, its metrics also in --textfile-dir when given; its exit status."""
    if args.textfile_dir is not None:
        print(f"textfile: {prom.write_textfile(report, args.textfile_dir)}")
    return print_summary(report, args.report_dir)


def print_summary(report: Report, report_dir: Path) -> int:
    summary = report.summary()
    print(
        "report: "
        + ", ".join(str(report_dir / report_files.FILES[kind]) for kind in ("json", "md", "prom", "html"))
    )
    print("summary: " + ", ".join(f"{k} {v}" for k, v in summary.items() if v))
    for line in markdown_report.guardian_console(report):  # a watch that acts: what it did per node
        print(printable(line))
    return _exit_status(report)


_exit_status = base.exit_status


def _write(report: Report, report_dir: Path, asked: interrupt.Interrupt) -> None:
    """The run's report files, with what a signal asked of it."""
    if not report.interrupted:
        report.interrupted = asked.described()
    report_files.write(report, report_dir)


def _held(name: str | None, hosts: dict[str, str]) -> contextlib.AbstractContextManager[object]:
    """The run lock on the hosts a changing command changes; nothing for a read-only one."""
    return runlock.hold(name, hosts) if name else contextlib.nullcontext()


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    command = registry.COMMANDS[args.command]
    try:
        if command.alone is not None:
            return command.alone(args, registry.COMMANDS)
        # one straight line: arguments, preflight, the lock when it changes nodes, the run, the report
        # files, the exit status
        command.validate(args)
        inventory = preflight.inventory_file(args.inventory)
        vault = _vault_file(args.vault_password_file)
        hosts, reached, listed = _preflight(args, inventory, vault)
        # the console says of each host what its command's report will (the registry's judges)
        console = registry.console(verbose=args.verbose, total=reached)
        asked = interrupt.Interrupt()
        run = base.Run(inventory, args.limit, args.report_dir, vault, console, asked, listed)
        with interrupt.installed(asked), _held(command.holds_as(args), hosts):
            try:
                report = command.started(args, run)
            except base.CanceledRun as stopped:
                # where each host stood when the second signal stopped the playbook
                _write(stopped.report, args.report_dir, asked)
                raise
            _write(report, args.report_dir, asked)
        return _finish(args, report)
    except (
        UsageError,
        preflight.ConfigError,
        runlock.Busy,
        report_mod.ReportError,
        ValueError,
    ) as exc:
        _error(f"gpufleet: error: {exc}")
        return EXIT_USAGE
    except runner.Canceled as exc:
        _error(
            f"gpufleet: interrupted: {exc}; its nodes may be part-way through it (drained, half-provisioned "
            "or gated): run gpufleet drift, or the same command again, to see where they stand"
        )
        return EXIT_NOT_OK
    except runner.RunnerError as exc:
        _error(f"gpufleet: error: {exc}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_NOT_OK


def _error(message: str) -> None:
    """A message to the operator's terminal: what it quotes (a node's output, a lock record, a path)
    with its control characters written out."""
    print(printable(message, lines=True), file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
