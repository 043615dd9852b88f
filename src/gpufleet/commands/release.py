"""`gpufleet release --limit <nodes> --reason "..."`: a person clears the "replace hardware" mark a watch
that acts (issue 39) left in a node's remediation history, after the repair (playbooks/release.yml: an
event `cleared` with the reason, under the node's run lock). It changes no scheduler state: the node stays
drained until the gate returns it."""

from __future__ import annotations

import argparse
import base64
from functools import partial

from gpufleet import events
from gpufleet.commands.base import BREAK_LOCK_HELP, Command, CommonOptions, Run, UsageError, run_reported
from gpufleet.commands.provision import APPLIES_ROLES, provision_host
from gpufleet.guardian_breaker import REASON_MAX, check_reason
from gpufleet.progress import Display
from gpufleet.report import HostReport, Report, now

PLAYBOOK = "release.yml"


def release_host(result: events.HostResult, check_mode: bool) -> HostReport:
    """A node as provision judges it (ok, changed, failed), its message saying what was cleared (or that it
    had no mark) and that the node stays drained until the gate returns it."""
    host = provision_host(result, check_mode)
    found = result.facts.get("gpufleet_release")
    if not isinstance(found, dict) or result.failed or result.unreachable:
        return host
    if str(found.get("cleared")).lower() == "true":
        done = "would be cleared" if check_mode else "cleared"
        said = (
            f"replace-hardware mark ({found.get('class')}, marked {found.get('marked')}) {done}: "
            f"{found.get('reason')}; the node stays drained until the gate returns it "
            f"(gpufleet gate --limit {result.name})"
        )
    else:
        said = "no replace-hardware mark: nothing cleared"
    host.message = "; ".join(filter(None, [said, host.message]))
    return host


def extravars(reason: str) -> dict[str, object]:
    """The playbook's reason, base64-encoded (as text in an extra var Ansible would template it)."""
    return {"gpufleet_release_reason_b64": base64.b64encode(reason.encode("utf-8")).decode("ascii")}


def release(options: CommonOptions, reason: str, display: Display | None = None) -> Report:
    """playbooks/release.yml on the --limit's nodes with ``reason``: the report (unwritten), "release
    --check" in check mode."""
    report = Report(command="release --check" if options.check else "release", started=now())
    run_options = options.run_options(
        PLAYBOOK, check=options.check, break_lock=options.break_lock, extravars=extravars(reason)
    )
    result = run_reported(report, run_options, display)
    for name, host in result.hosts.items():
        report.hosts[name] = release_host(host, options.check)
    report.finished = now()
    return report


def _run(command: Command, args: argparse.Namespace, run: Run) -> Report:
    options = run.target(CommonOptions, check=args.check, break_lock=args.break_lock)
    return release(options, args.reason, run.progress)


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--reason",
        help=f"required: what was repaired, recorded in the node's history (1..{REASON_MAX} printable "
        "characters), e.g. 'GPU 3 replaced, RMA 4711'",
    )
    parser.add_argument("--check", action="store_true", help="report what would be cleared; change nothing")
    parser.add_argument("--break-lock", action="store_true", help=BREAK_LOCK_HELP)
    parser.set_defaults(diff=False, tags=None)


def _validate(args: argparse.Namespace) -> None:
    """--limit and --reason are required, refused before anything runs (exit 2)."""
    if not args.limit:
        raise UsageError(
            "--limit is required: name the repaired nodes (gpufleet release never clears the whole fleet "
            "by default)"
        )
    if args.reason is None:
        raise UsageError(f"--reason is required: what was repaired, 1..{REASON_MAX} printable characters")
    try:
        args.reason = check_reason(args.reason)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


COMMAND = Command(
    name="release",
    summary="clear a node's replace-hardware mark after its repair (--limit, --reason required)",
    description="Clear the 'replace hardware' mark a watch that acts (gpufleet watch --act) left in each "
    "node's remediation history, after the repair: an event 'cleared' with --reason, under the node's run "
    "lock (playbooks/release.yml). It changes no scheduler state and starts nothing: the node stays drained "
    "until the gate (gpufleet gate --limit NODE) judges it and returns it, which the mark "
    "(guardian.replace_hardware) kept it from. A node without a mark is left as it is. --check reports what "
    "would be cleared.",
    add_arguments=_arguments,
    run=_run,
    playbook=PLAYBOOK,
    validate=_validate,
    **dict(
        APPLIES_ROLES,
        judge=partial(release_host, check_mode=False),
        check_judge=partial(release_host, check_mode=True),
    ),
)
