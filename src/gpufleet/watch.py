"""`gpufleet watch`: one read-only look at every serving node (playbooks/watch.yml), made to run on
a schedule (docs/watch.md): a small report, and its Prometheus file replaced atomically each run.

Read-only: it takes no run lock and never stops a node; a failed check makes the node ``failed`` in
the report, with the checks' messages (value, limit, likely cause).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpufleet import checks, quarantine, runner
from gpufleet.drift import DRIFT_FORKS
from gpufleet.report import HostReport, Report, now


@dataclass(frozen=True)
class WatchOptions(runner.Target):
    window_s: float | None = None


def watch_host(result: runner.HostResult) -> HostReport:
    """A node's look: its checks, and only the watch reading among its facts (a small report)."""
    reading = result.facts.get("gpufleet_watch")
    host = HostReport(checks=result.checks, facts={"gpufleet_watch": reading} if reading else {})
    host.status = checks.host_status(
        unreachable=result.unreachable, failed=result.failed, checks=result.checks
    )
    host.configuration_error = result.refused_for_input()
    if result.unreachable or result.failed:
        host.message = result.failure_message()
    else:
        host.message = summary(result.checks)
        # what a watch that acts would take out of service (quarantine.UNSAFE); the rest is reported only
        classes = quarantine.unsafe_classes(result.checks)
        if classes:
            host.message = f"unsafe to serve ({quarantine.describe(classes)}): {host.message}"
    return host


def summary(found: list[dict[str, object]]) -> str:
    """The failed checks, one phrase per condition: 16 GPUs capped alike read as one line, not 16."""
    by_condition: dict[str, list[dict[str, object]]] = {}
    for c in found:
        if not c["ok"]:
            by_condition.setdefault(str(c["name"]).split("[")[0], []).append(c)
    phrases = []
    for condition, failed in by_condition.items():
        more = f" (and {len(failed) - 1} more {condition})" if len(failed) > 1 else ""
        phrases.append(f"{failed[0]['message']}{more}")
    return "; ".join(phrases)


def extravars(window_s: float | None) -> dict[str, object]:
    """--window, when given, is watch_window_s (the module checks its range)."""
    return {} if window_s is None else {"watch_window_s": window_s}


def watch(options: WatchOptions, progress: runner.Progress | None = None) -> Report:
    """playbooks/watch.yml: the report (unwritten: the CLI writes every report)."""
    report = Report(command="watch", started=now())
    result = runner.run_playbook(
        options.run_options("watch.yml", extravars=extravars(options.window_s), forks=DRIFT_FORKS),
        progress=progress,
    )
    for name in sorted(result.hosts):
        report.hosts[name] = watch_host(result.hosts[name])
    report.finished = now()
    return report
