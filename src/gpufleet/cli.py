"""`gpufleet`: one command for the fleet. Errors become exit codes here and only here:
0 all good, 1 a host blocked, drifted, failed or was unreachable, 2 refused before anything changed
(usage, configuration, or the hosts held by another run: the controller's lock or a node's)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpufleet import (
    catalog,
    commands,
    from_events,
    interrupt,
    preflight,
    prom,
    report_files,
    runlock,
    runner,
)
from gpufleet import drift as drift_mod
from gpufleet import report as report_mod
from gpufleet import watch as watch_mod
from gpufleet.printable import printable
from gpufleet.report import Report

EXIT_OK, EXIT_NOT_OK, EXIT_USAGE = 0, 1, 2
DEFAULT_REPORT_DIR = Path("reports/latest")

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


class UsageError(Exception):
    """Bad arguments or configuration: nothing was run."""


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--inventory",
        "-i",
        type=Path,
        help="inventory (default: ANSIBLE_INVENTORY, else the inventory of gpufleet's ansible.cfg)",
    )
    parser.add_argument("--limit", "-l", help="Ansible host pattern to limit the run to")
    parser.add_argument("--report-dir", type=Path, default=DEFAULT_REPORT_DIR, help="where reports go")
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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpufleet",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)

    facts = sub.add_parser("facts", help="gather GPU and RDMA facts from every node and report")
    _common(facts)

    provision = sub.add_parser(
        "provision", help="apply every role (playbooks/provision.yml) and report changes"
    )
    _common(provision)
    provision.add_argument("--tags", "-t", help="only these roles (comma-separated role names)")
    provision.add_argument("--check", action="store_true", help="report what would change; change nothing")
    provision.add_argument("--diff", action="store_true", help="show file and setting differences")
    provision.add_argument("--break-lock", action="store_true", help=BREAK_LOCK_HELP)

    # `check` is provision's check mode with diff: the same run, report and exit statuses.
    check = sub.add_parser(
        "check", help="what provision would change on every node (check mode, diff); changes nothing"
    )
    _common(check)
    check.add_argument("--tags", "-t", help="only these roles (comma-separated role names)")
    check.set_defaults(check=True, diff=True)

    switch = sub.add_parser(
        "switch",
        help="apply the lossless RoCE profile on the leaf switches (NVUE); --check: what would change",
    )
    _common(switch)
    switch.add_argument("--check", action="store_true", help="report what would change; change nothing")
    switch.set_defaults(diff=True, tags=None)

    gate = sub.add_parser(
        "gate", help="post-maintenance gate: thermal, coolant, start, burn-in, prefix cache"
    )
    _common(gate)
    gate.add_argument(
        "--burn-in-seconds", type=int, help="burn-in length (default: thermal_gate_burn_in_seconds)"
    )
    gate.add_argument("--break-lock", action="store_true", help=BREAK_LOCK_HELP)

    drift = sub.add_parser("drift", help="compare every role with every node; --fix rolls the roles out")
    _common(drift)
    drift.add_argument("--fix", action="store_true", help="apply the roles to drifted nodes, in batches")
    drift.add_argument("--batch", default="10%", help="nodes per batch with --fix: a count or a percentage")
    drift.add_argument("--break-lock", action="store_true", help=f"with --fix: {BREAK_LOCK_HELP}")
    drift.add_argument(
        "--max-fail-percent",
        type=float,
        default=0.0,
        metavar="P",
        help="stop the rollout when more than P percent of a batch fails (0..100; default 0: the first "
        "failure stops it)",
    )

    watch = sub.add_parser(
        "watch",
        help="read-only look at every serving node: power caps, throttling, RoCE, vLLM (for a schedule)",
    )
    _common(watch)
    watch.add_argument(
        "--window",
        type=float,
        help="seconds each node is watched, 1..300 (default: watch_window_s, 5); the module checks it",
    )

    show = sub.add_parser(
        "report",
        help="print the report in DIR/report.json again; rebuild report.md, gpufleet.prom and report.html",
    )
    show.add_argument("--report-dir", type=Path, default=DEFAULT_REPORT_DIR, help="where the report is")
    show.add_argument("--format", choices=report_files.FORMATS, default="md", help="what to print")
    show.add_argument(
        "--from-events",
        type=Path,
        nargs="+",
        metavar="DIR",
        help="build the report from these ansible-runner artifact directories (job_events/; one per slice "
        "of a job, merged) and write it into --report-dir",
    )

    return parser


def _vault_file(given: Path | None) -> Path | None:
    """An explicit file wins, then ANSIBLE_VAULT_PASSWORD_FILE."""
    given = preflight.vault_file(given)
    if given is not None:
        preflight.vault_file_usable(given)
    return given


def _preflight(args: argparse.Namespace, inventory: Path, vault: Path | None) -> tuple[dict[str, str], int]:
    """Configuration errors, found before the first play (nothing drained, nothing changed); the
    hosts the run holds (its lock), and how many hosts it reaches (the leaves it reads too)."""
    preflight.report_dir(args.report_dir)
    if getattr(args, "textfile_dir", None) is not None:
        # `check` is `provision --check`: its report, so its file, is provision's
        command = "provision" if args.command == "check" else args.command
        textfile = prom.textfile_name(Report(command=command, started=""))
        preflight.report_dir(args.textfile_dir, "--textfile-dir", create=False, files=(textfile,))
    playbook = catalog.COMMANDS[args.command]
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
    if args.command == "gate" or reads_switches or vault is not None:
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
    return held, reached


def _changing(args: argparse.Namespace) -> str | None:
    """The name of a command that changes nodes (None for the read-only ones)."""
    if args.command == "provision" and not args.check:
        return "gpufleet provision"
    if args.command == "gate":
        return "gpufleet gate"
    if args.command == "drift" and args.fix:
        return "gpufleet drift --fix"
    if args.command == "switch" and not args.check:
        return "gpufleet switch"
    return None


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
    return _exit_status(report)


def _exit_status(report: Report) -> int:
    """2 when a host was refused for its inputs (configuration), else 0 all good or 1."""
    if report.configuration_error():
        return EXIT_USAGE
    return EXIT_OK if report.all_ok() else EXIT_NOT_OK


def _report(report_dir: Path, fmt: str) -> int:
    """An existing report again: printed in one format, report.md, gpufleet.prom and report.html
    rebuilt from report.json; the exit status is the one the command that wrote it returned."""
    report = report_mod.load(report_dir / report_files.FILES["json"])
    try:
        report_files.write(report, report_dir, kinds=("md", "prom", "html"))
    except OSError as exc:
        raise UsageError(f"cannot rebuild the report files in {report_dir}: {exc}") from None
    sys.stdout.write(report_files.render(report, fmt))
    return _exit_status(report)


def _report_from_events(directories: list[Path], report_dir: Path, fmt: str) -> int:
    """The report of a run made elsewhere (an execution node, an AWX job's slices), from its events:
    written into report_dir, printed in one format; the exit status the command would have returned."""
    preflight.report_dir(report_dir)
    report = from_events.report_of(directories)
    report_files.write(report, report_dir)
    sys.stdout.write(report_files.render(report, fmt))
    return _exit_status(report)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # the console says of each host what its command's report will (the judges sit above progress.py)
    commands.progress.judges = from_events.REPORT_JUDGES
    try:
        if args.command == "report" and args.from_events:
            return _report_from_events(args.from_events, args.report_dir, args.format)
        if args.command == "report":
            return _report(args.report_dir, args.format)
        _arguments(args)
        inventory = preflight.inventory_file(args.inventory)
        vault = _vault_file(args.vault_password_file)
        hosts, reached = _preflight(args, inventory, vault)
        commands.progress.verbose = args.verbose
        commands.progress.total = reached
        changing = _changing(args)
        with interrupt.installed():
            if changing is None:
                return _run(args, inventory, vault)
            with runlock.hold(changing, hosts):
                return _run(args, inventory, vault)
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


def _arguments(args: argparse.Namespace) -> None:
    """Options out of range are usage errors, found before anything is read."""
    if args.command == "switch" and args.limit is None:
        # the switch play reaches the leaves only; the lock and the preflight need no more
        args.limit = runner.SWITCH_GROUP
    if args.command == "drift":
        if not 0 <= args.max_fail_percent <= 100:
            raise UsageError(f"--max-fail-percent must be 0..100, got {args.max_fail_percent:g}")
        drift_mod.batch_size(args.batch, 1)
    if args.command == "gate" and args.burn_in_seconds is not None and not 1 <= args.burn_in_seconds <= 3600:
        raise UsageError(f"--burn-in-seconds must be between 1 and 3600, got {args.burn_in_seconds}")


def _run(args: argparse.Namespace, inventory: Path, vault: Path | None) -> int:
    """One of the commands that run playbooks, its report printed; its exit status."""
    if args.command == "switch":
        options = commands.CommonOptions(
            inventory, args.limit, args.report_dir, check=args.check, diff=True, vault_password_file=vault
        )
        return _finish(args, commands.switch(options))
    if args.command in ("provision", "check"):
        options = commands.CommonOptions(
            inventory,
            args.limit,
            args.report_dir,
            tags=args.tags,
            check=args.check,
            diff=args.diff,
            vault_password_file=vault,
            break_lock=getattr(args, "break_lock", False),
        )
        return _finish(args, commands.provision(options))
    if args.command == "drift":
        drift_options = drift_mod.DriftOptions(
            inventory,
            args.limit,
            args.report_dir,
            vault,
            args.fix,
            args.batch,
            args.max_fail_percent,
            break_lock=args.break_lock,
        )
        return _finish(args, drift_mod.drift(drift_options, commands.progress))
    if args.command == "gate":
        options = commands.CommonOptions(
            inventory, args.limit, args.report_dir, vault_password_file=vault, break_lock=args.break_lock
        )
        return _finish(args, commands.gate(options, args.burn_in_seconds))
    if args.command == "watch":
        watch_options = watch_mod.WatchOptions(
            inventory, args.limit, args.report_dir, vault, window_s=args.window
        )
        return _finish(args, watch_mod.watch(watch_options, commands.progress))
    report = commands.facts(commands.CommonOptions(inventory, args.limit, args.report_dir))
    return _finish(args, report)


if __name__ == "__main__":
    sys.exit(main())
