"""The `gpufleet` commands that run playbooks and write a report."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gpufleet import checks, drift, interrupt, runner
from gpufleet.progress import Display
from gpufleet.report import HostReport, Report, now
from gpufleet.report_files import write


@dataclass(frozen=True)
class CommonOptions(runner.Target):
    tags: str | None = None
    check: bool = False
    diff: bool = False
    # take the nodes' run locks even from another run's record (that run is gone)
    break_lock: bool = False


# What every command prints while it runs (stderr); the CLI sets its verbosity (--verbose).
progress = Display()


def facts_host(result: runner.HostResult) -> HostReport:
    if result.unreachable or result.failed:
        facts = {} if result.unreachable else _reported_facts(result.facts)
        host = HostReport(facts=facts, message=result.failure_message())
        host.status = checks.host_status(unreachable=result.unreachable, failed=result.failed)
        return host
    expected = result.facts.get("gpufleet_expected_gpu_count")
    # the modules' own verdicts (gpu_facts, rdma_facts with judge), then what only the controller knows
    host_checks = [
        *result.checks,
        *checks.facts_checks(result.facts, int(expected) if expected is not None else None),
    ]
    return HostReport(
        status=checks.host_status(checks=host_checks), checks=host_checks, facts=_reported_facts(result.facts)
    )


def run_reported(
    report: Report,
    options: runner.RunOptions,
    report_dir: Path,
    after_cancel: Callable[[runner.Canceled], dict[str, str]] | None = None,
) -> runner.RunResult:
    """runner.run_playbook; when a second signal stops it, the report still says where each host
    stands (interrupted, at which task, left drained, and what ``after_cancel`` did about it) before
    the Canceled goes on to the exit."""
    try:
        return runner.run_playbook(options, progress=progress)
    except runner.Canceled as exc:
        notes = after_cancel(exc) if after_cancel else {}
        for name, result in exc.hosts.items():
            # the task it was on, and the drain task that drained it (named)
            host = HostReport(status="interrupted", message=f"{exc}: {result.where_stopped()}")
            if notes.get(name):
                host.message += f"; {notes[name]}"
            report.hosts[name] = host
        report.finished = now()
        write(report, report_dir)
        raise


def _reported_facts(facts: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in facts.items() if k.startswith("gpufleet_")}


def facts(options: CommonOptions) -> Report:
    report = Report(command="facts", started=now())
    result = run_reported(
        report,
        options.run_options("facts.yml"),
        options.report_dir,
    )
    for name, host in result.hosts.items():
        report.hosts[name] = facts_host(host)
    report.finished = now()
    write(report, options.report_dir)
    return report


def provision_host(result: runner.HostResult, check_mode: bool) -> HostReport:
    host = HostReport(checks=result.checks, changes=result.changes, facts=_reported_facts(result.facts))
    notes = list(result.hints)
    if result.reboot_required:
        notes.insert(0, "reboot required for a change to take effect")
    if result.unreachable or result.failed:
        notes.insert(0, result.failure_message())
    host.status = result.status(check_mode)
    host.message = "; ".join(n for n in notes if n)
    host.configuration_error = result.refused_for_input()
    return host


def provision(options: CommonOptions) -> Report:
    """playbooks/provision.yml: every role, in order; changes per host in the report."""
    return _apply(options, "provision.yml", "provision")


def switch(options: CommonOptions) -> Report:
    """playbooks/switch_qos.yml: the lossless RoCE profile on the leaf switches; changes per switch."""
    return _apply(options, "switch_qos.yml", "switch")


def _apply(options: CommonOptions, playbook: str, command: str) -> Report:
    report = Report(command=f"{command} --check" if options.check else command, started=now())
    result = run_reported(
        report,
        options.run_options(
            playbook, tags=options.tags, check=options.check, diff=options.diff, break_lock=options.break_lock
        ),
        options.report_dir,
    )
    for name, host in result.hosts.items():
        report.hosts[name] = provision_host(host, options.check)
    report.finished = now()
    write(report, options.report_dir)
    return report


def gate_host(result: runner.HostResult) -> HostReport:
    """A node found unfit at any step is blocked: it stays out of service, its instances stopped; one
    refused before the drain (its inputs, another run's lock) is left as it was: failed, never blocked.
    A leaf switch the gate only read is judged as drift judges it (drifted when its profile differs)."""
    if result.only_read_leaf():
        return drift.drift_host(result)
    host = HostReport(checks=result.checks, changes=result.changes, facts=_reported_facts(result.facts))
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


def _stop_unfinished(options: CommonOptions, stopped: runner.Canceled) -> dict[str, str]:
    """After a gate stopped by a second signal: the nodes it reached and had not passed serve nothing
    and keep no marker (playbooks/gate_stop.yml). A signal now lets this finish; another stops it."""
    names = sorted(
        name
        for name, host in stopped.hosts.items()
        if not any(t["task"] == _PASSED_TASK and t["outcome"] == "ok" for t in host.tasks)
    )
    if not names:
        return {}
    progress(f"gate: stopping the instances and withdrawing the markers of {', '.join(names)}")
    with interrupt.installed():
        try:
            result = runner.run_playbook(
                options.run_options("gate_stop.yml", limit=",".join(names)),
                progress=progress,
            )
        except runner.RunnerError as exc:
            return dict.fromkeys(names, f"its instances may still run ({exc})")
    return {
        name: "instances stopped, markers withdrawn"
        if not (host.failed or host.unreachable)
        else f"its instances may still run ({host.failure_message()})"
        for name, host in result.hosts.items()
    }


def gate(options: CommonOptions, burn_in_seconds: int | None = None) -> Report:
    """playbooks/post_maintenance.yml: every check per host; only passing nodes serve."""
    report = Report(command="gate", started=now())
    extravars: dict[str, object] = {}
    if burn_in_seconds is not None:
        extravars["thermal_gate_burn_in_seconds"] = burn_in_seconds
    result = run_reported(
        report,
        options.run_options(
            "post_maintenance.yml", tags=options.tags, extravars=extravars, break_lock=options.break_lock
        ),
        options.report_dir,
        after_cancel=lambda stopped: _stop_unfinished(options, stopped),
    )
    for name, host in result.hosts.items():
        report.hosts[name] = gate_host(host)
    report.finished = now()
    write(report, options.report_dir)
    return report
