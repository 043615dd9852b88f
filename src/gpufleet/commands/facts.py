"""`gpufleet facts`: GPU and RDMA facts from every node (playbooks/facts.yml)."""

from __future__ import annotations

import argparse

from gpufleet import checks, runner
from gpufleet.commands.base import Command, Run, reported_facts, run_reported
from gpufleet.progress import Display
from gpufleet.report import HostReport, Report, now


def facts_host(result: runner.HostResult) -> HostReport:
    if result.unreachable or result.failed:
        facts = {} if result.unreachable else reported_facts(result.facts)
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
        status=checks.host_status(checks=host_checks), checks=host_checks, facts=reported_facts(result.facts)
    )


def facts(options: runner.Target, display: Display | None = None) -> Report:
    """playbooks/facts.yml: every node's facts, judged; the report (unwritten)."""
    report = Report(command="facts", started=now())
    result = run_reported(report, options.run_options(COMMAND.playbook or ""), display)
    for name, host in result.hosts.items():
        report.hosts[name] = facts_host(host)
    report.finished = now()
    return report


def _run(command: Command, args: argparse.Namespace, run: Run) -> Report:
    target = run.target(runner.Target)
    return facts(target, run.progress)


def _arguments(parser: argparse.ArgumentParser) -> None:
    """facts takes the fleet's arguments only."""


COMMAND = Command(
    name="facts",
    summary="gather GPU and RDMA facts from every node and report",
    description="Gather each node's GPU and RDMA facts (playbooks/facts.yml) and judge them: the GPU count "
    "the inventory expects, ECC, the GPU topology. Changes nothing.",
    add_arguments=_arguments,
    run=_run,
    playbook="facts.yml",
    judge=facts_host,
)
