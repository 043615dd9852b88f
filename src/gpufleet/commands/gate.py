"""`gpufleet gate`: the post-maintenance gate (playbooks/post_maintenance.yml): a node passes every
check and serves again, or stays out of service with its instances stopped."""

from __future__ import annotations

import argparse

from gpufleet import checks, drift, interrupt, runner
from gpufleet.commands.base import (
    BREAK_LOCK_HELP,
    Command,
    CommonOptions,
    Run,
    UsageError,
    reported_facts,
    run_reported,
)
from gpufleet.progress import Display
from gpufleet.report import HostReport, Report, now


def gate_host(result: runner.HostResult) -> HostReport:
    """A node found unfit at any step is blocked: it stays out of service, its instances stopped; one
    refused before the drain (its inputs, another run's lock) is left as it was: failed, never blocked.
    A leaf switch the gate only read is judged as drift judges it (drifted when its profile differs)."""
    if result.only_read_leaf():
        return drift.drift_host(result)
    host = HostReport(checks=result.checks, changes=result.changes, facts=reported_facts(result.facts))
    refused = _refused_before_drain(result)
    host.status = checks.host_status(
        unreachable=result.unreachable,
        failed=result.failed,
        checks=result.checks,
        failed_as="failed" if refused else "blocked",
    )
    host.configuration_error = result.refused_for_input()
    if host.status == "unreachable":
        host.message = result.failure_message()
    elif host.status in ("blocked", "failed"):
        # The first failed task is the step that blocked the node (the later ones are the gate's own
        # "keep it out of service"); a failed check with no failed task still names itself.
        if any(t["outcome"] == "failed" for t in result.tasks):
            host.message = f"did not pass the post-maintenance gate at {result.failure_message()}"
        else:
            failed_checks = ", ".join(checks.failed_names(result.checks))
            host.message = f"did not pass the post-maintenance gate: {failed_checks} failed"
        if result.drained():
            host.message += "; left drained"
        elif refused:
            host.message += "; refused before the drain: left as it was, nothing of it stopped"
    # An operator's override of a failed gate is on the record, with its reason.
    for task in result.tasks:
        if task.get("override"):
            reason = task["override"].get("reason", "")
            host.message = "; ".join(filter(None, [host.message, f"gate overridden: {reason}"]))
    # Every hint, as provision's report has them: what a re-asserted power limit may have been capped
    # by (the rack's power budget), a BMC read over plain HTTP with the reason given for it.
    host.message = "; ".join(filter(None, [host.message, *result.hints]))
    return host


# The plays of post_maintenance.yml before its drain: a node refused there is left as it was.
_BEFORE_DRAIN_PLAYS = (runner.INPUTS_PLAY, "Judge each node before it is drained")
# The task every blocked node ends at (roles/thermal_gate/tasks/blocked.yml), whatever step found it
# unfit, before the drain too (playbooks/tasks/unfit_before_drain.yml): its instances were stopped.
_BLOCKED_TASK = "gpufleet.node.thermal_gate : Keep the node out of service"


def _refused_before_drain(result: runner.HostResult) -> bool:
    """Whether the gate refused the node before its drain with nothing of it changed: its inputs (or
    another run's lock), not a node it found unfit there (blocked: drained, instances stopped)."""
    failed = next((t for t in result.tasks if t["outcome"] == "failed" and not t.get("ignored")), {})
    if not str(failed.get("play", "")).startswith(_BEFORE_DRAIN_PLAYS):
        return False
    return not any(t["task"] == _BLOCKED_TASK and t["outcome"] == "failed" for t in result.tasks)


# The thermal_gate task that marks a node passed (roles/thermal_gate/tasks/verify.yml: the burn-in's one
# module run writes the marker when all of it passed): a node an interrupted gate got that far with needs
# no stopping.
_PASSED_TASK = "gpufleet.node.thermal_gate : Burn in, check the prefix cache and mark the node passed"


def _stop_unfinished(
    options: CommonOptions, stopped: runner.Canceled, display: Display | None
) -> dict[str, str]:
    """After a gate stopped by a second signal: the nodes it reached and had not passed serve nothing
    and keep no marker (playbooks/gate_stop.yml). A signal now lets this finish; another stops it."""
    names = sorted(
        name
        for name, host in stopped.hosts.items()
        if not any(t["task"] == _PASSED_TASK and t["outcome"] == "ok" for t in host.tasks)
    )
    if not names:
        return {}
    if display is not None:
        display(f"gate: stopping the instances and withdrawing the markers of {', '.join(names)}")
    with interrupt.installed() as fresh:
        try:
            result = runner.run_playbook(
                options.run_options("gate_stop.yml", limit=",".join(names), interrupt=fresh),
                progress=display,
            )
        except runner.RunnerError as exc:
            return dict.fromkeys(names, f"its instances may still run ({exc})")
    return {
        name: "instances stopped, markers withdrawn"
        if not (host.failed or host.unreachable)
        else f"its instances may still run ({host.failure_message()})"
        for name, host in result.hosts.items()
    }


def extravars(burn_in_seconds: int | None) -> dict[str, object]:
    """The gate's extra vars: --burn-in-seconds, when given, is thermal_gate_burn_in_seconds."""
    return {} if burn_in_seconds is None else {"thermal_gate_burn_in_seconds": burn_in_seconds}


def gate(
    options: CommonOptions, burn_in_seconds: int | None = None, display: Display | None = None
) -> Report:
    """playbooks/post_maintenance.yml: every check per host; only passing nodes serve (the report,
    unwritten)."""
    report = Report(command="gate", started=now())
    result = run_reported(
        report,
        options.run_options(
            "post_maintenance.yml",
            tags=options.tags,
            extravars=extravars(burn_in_seconds),
            break_lock=options.break_lock,
        ),
        display,
        after_cancel=lambda stopped: _stop_unfinished(options, stopped, display),
    )
    for name, host in result.hosts.items():
        report.hosts[name] = gate_host(host)
    report.finished = now()
    return report


def _run(command: Command, args: argparse.Namespace, run: Run) -> Report:
    options = run.target(CommonOptions, break_lock=args.break_lock)
    return gate(options, args.burn_in_seconds, run.progress)


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--burn-in-seconds", type=int, help="burn-in length (default: thermal_gate_burn_in_seconds)"
    )
    parser.add_argument("--break-lock", action="store_true", help=BREAK_LOCK_HELP)


def _validate(args: argparse.Namespace) -> None:
    if args.burn_in_seconds is not None and not 1 <= args.burn_in_seconds <= 3600:
        raise UsageError(f"--burn-in-seconds must be between 1 and 3600, got {args.burn_in_seconds}")


COMMAND = Command(
    name="gate",
    summary="post-maintenance gate: thermal, coolant, start, burn-in, prefix cache",
    description="Admit nodes back to service after maintenance (playbooks/post_maintenance.yml): drain, "
    "judge every role and the hardware's health, re-assert the roles, then the thermal gate (coolant, "
    "idle temperatures, the instances started, a burn-in under load, the prefix cache). A node that "
    "fails any step is blocked: it stays out of service, its instances stopped.",
    add_arguments=_arguments,
    run=_run,
    playbook="post_maintenance.yml",
    changes=lambda args: True,
    validate=_validate,
    extravars=lambda args: extravars(args.burn_in_seconds),
    judge=gate_host,
    # what a stopped gate reached: the report says interrupted (and what the stop did about it)
    later_playbooks={"gate_stop.yml": lambda host: "interrupted"},
    on_cancel=_stop_unfinished,
    needs_secrets=True,
)
