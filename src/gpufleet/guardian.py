"""`gpufleet watch --act`: the watch, then acting on what it found (issue 39, docs/guardian.md).

One straight line, each step only when the one before asks for it:

1. the watch (playbooks/watch.yml, read-only): each node's checks, its remediation history and its drain
   record (the watch module's reading);
2. the leaves, read only when a node failed on its RoCE side (a leaf down or without PFC/ECN explains
   those failures: the leaf is named, no node behind it is taken out);
3. the decisions (guardian_plan.plan): the settings from the inventory (guardian_settings, checked
   before anything changes), the node's history (guardian_escalation), the circuit breaker
   (guardian_breaker: a quarantine is counted before the node is touched, so a killed run still counts it);
4. with --check, the report of what it would do, and nothing else;
5. playbooks/guardian_act.yml on the nodes to take out: run lock, drain (a reason naming the failed
   checks), instances stopped, history recorded, then the remediation each class opted into;
6. the gate (commands/gate.gate) on the nodes remediated: a node that passes is back in service, one that
   fails stays out, named; playbooks/guardian_record.yml records the gate's verdict in the node's history.

A first signal lets the step under way finish and starts no other: a node is always drained before
anything else is done to it, so wherever the run stops, the node is out of service and the report says
where it stopped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from gpufleet import (
    drift,
    guardian_breaker,
    guardian_escalation,
    guardian_plan,
    guardian_settings,
    preflight,
    runner,
)
from gpufleet import watch as watch_mod
from gpufleet.commands import gate as gate_cmd
from gpufleet.commands.base import CommonOptions
from gpufleet.report import TIME_FORMAT, HostReport, Report, now

ACT_PLAYBOOK = "guardian_act.yml"
RECORD_PLAYBOOK = "guardian_record.yml"
# The node's failures a leaf can explain: its RoCE ports' state and what their counters show under
# traffic (a leaf down, without PFC or ECN). Not the host's own settings (fabric.host_pfc) nor the
# port's physical layer (symbol errors, the NIC's firmware): those are the node's.
LEAF_FAMILIES = tuple(
    f"{family}["
    for family in (
        "rdma_link.link_state",
        "fabric.retransmits",
        "fabric.pause_duration",
        "fabric.pause_storm",
        "fabric.rx_discards",
        "fabric.rx_out_of_buffer",
        "fabric.traffic",
        "fabric.link_flaps",
        "fabric.ecn_loop",
        "fabric.qp_failures",
    )
)


@dataclass(frozen=True)
class GuardianOptions(watch_mod.WatchOptions):
    check: bool = False
    # the gate's burn-in after a remediation (None: the inventory's thermal_gate_burn_in_seconds)
    burn_in_seconds: int | None = None
    # the preflight's ansible-inventory listing (hostvars: settings and cabling)
    listing: Mapping[str, Any] = field(default_factory=dict, compare=False)


def _hostvars(options: GuardianOptions) -> dict[str, dict[str, Any]]:
    """The GPU nodes' variables (the listing has the leaf switches too: the guardian's settings are the
    nodes', and the breaker's must agree across them alone)."""
    listing = dict(options.listing)
    leaves = preflight.group_members(listing, runner.SWITCH_GROUP)
    found = (listing.get("_meta") or {}).get("hostvars") or {}
    return {name: dict(found[name]) for name in found if name not in leaves}


def _reading(host: HostReport) -> dict[str, Any]:
    return dict(host.facts.get("gpufleet_watch") or {})


def _failed_names(host: HostReport) -> list[str]:
    return [str(c.get("name", "")) for c in host.checks if not c.get("ok")]


def needs_leaves(report: Report) -> bool:
    """Whether a node failed where a leaf could be the cause (then the leaves are read, else never)."""
    return any(
        name.startswith(LEAF_FAMILIES) for host in report.hosts.values() for name in _failed_names(host)
    )


def read_leaves(options: GuardianOptions, progress: runner.Progress | None) -> dict[str, str]:
    """Each leaf that explains failures behind it -> why (unreachable, unreadable, or what differs from
    its lossless profile: PFC, ECN, ...), read as drift reads them (playbooks/drift.yml on the leaves)."""
    result = runner.run_playbook(
        options.run_options("drift.yml", limit=runner.SWITCH_GROUP, forks=drift.DRIFT_FORKS),
        progress=progress,
    )
    bad: dict[str, str] = {}
    for name, host in sorted(result.hosts.items()):
        judged = drift.drift_host(host)
        if judged.status in ("failed", "unreachable"):
            bad[name] = judged.message or judged.status
        elif judged.changes:
            settings = ", ".join(
                f"{c['setting']} is {c['from']} (profile: {c['to']})" for c in judged.changes
            )
            bad[name] = f"differs from its lossless RoCE profile: {settings}"
    return bad


def _step(step: str, outcome: str, message: str, started: str = "", finished: str = "") -> dict[str, Any]:
    return {
        "step": step,
        "started": started or now(),
        "finished": finished or now(),
        "outcome": outcome,
        "message": message,
    }


def _record(host: HostReport, decision: guardian_plan.Decision) -> None:
    host.guardian = {**decision.as_guardian(), "steps": []}
    host.message = "; ".join(filter(None, [f"{host.guardian['decision']}: {decision.why}", host.message]))


# The task names of playbooks/guardian_act.yml that begin each step the report times.
ACT_STEPS = (
    ("quarantine", "Quarantine:"),
    ("replace_hardware", "Replace hardware:"),
    ("gpu_reset", "GPU reset:"),
    ("reboot", "Reboot:"),
)


def report_time(runner_time: str) -> str:
    """ansible-runner's ISO time (microseconds, an offset) as the report writes times; '' stays ''."""
    if not runner_time:
        return ""
    try:
        return datetime.fromisoformat(runner_time).astimezone(UTC).strftime(TIME_FORMAT)
    except ValueError:
        return runner_time


def act_steps(tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A node's steps in guardian_act.yml from its task results: each step from its first task's start
    to its last task's end, failed when one of its tasks failed (that task's message)."""
    steps: dict[str, dict[str, Any]] = {}
    for task in tasks:
        name = str(task.get("task", "")).split(" : ")[-1]
        step = next((s for s, prefix in ACT_STEPS if name.startswith(prefix)), None)
        if step is None or task["outcome"] == "skipped":
            continue  # a step the node did not take (another remediation's tasks skip)
        found = steps.setdefault(
            step,
            {"step": step, "started": report_time(task.get("start", "")), "outcome": "ok", "message": ""},
        )
        found["finished"] = report_time(task.get("end", ""))
        if str(task.get("action", "")).startswith("gpufleet.node.") and task.get("msg"):
            # what the step's own module said (the resets sent and when, each GPU's reset)
            found["message"] = str(task["msg"])
        if task["outcome"] in ("failed", "unreachable") and not task.get("ignored"):
            found["outcome"] = "failed"
            found["message"] = f"{name}: {task.get('msg') or task['outcome']}"
    return list(steps.values())


def _nodes_of(report: Report, hostvars: Mapping[str, Any]) -> list[str]:
    """The nodes the watch looked at (the leaves are not its hosts)."""
    return sorted(n for n in report.hosts if n in hostvars or not n.startswith("leaf"))


def guard(options: GuardianOptions, progress: runner.Progress | None = None) -> Report:
    """The watch, and what it decided and did: the report (unwritten: the CLI writes every report)."""
    hostvars = _hostvars(options)
    # every setting checked before the first look: a bad one stops the run, nothing changed (exit 2)
    settings = guardian_settings.settings_for(hostvars)
    guardian_settings.fleet_breaker(settings)
    report = watch_mod.watch(options, progress)
    report.command = "watch --act"
    report.guardian = {"check": options.check}
    nodes = _nodes_of(report, hostvars)
    leaves = read_leaves(options, progress) if needs_leaves(report) else {}
    with guardian_breaker.held():
        breaker = guardian_breaker.load()
        moment = datetime.now(UTC)
        planned = guardian_plan.plan(
            hosts={n: report.hosts[n].checks for n in nodes},
            histories={n: list(_reading(report.hosts[n]).get("history") or []) for n in nodes},
            drain_records={n: _reading(report.hosts[n]).get("drain_record") for n in nodes},
            settings={n: settings[n] for n in nodes if n in settings},
            breaker_state=breaker,
            leaf_verdicts=leaves,
            cabling={n: dict(hostvars.get(n, {}).get("fabric_cabling") or {}) for n in nodes},
            now=moment,
        )
        report.guardian["breaker"] = guardian_breaker.summary(
            planned.breaker, guardian_settings.fleet_breaker(settings), planned.limit, moment
        )
        report.guardian["leaves"] = {**leaves, **planned.leaves}
        if not options.check:
            # counted before any node is touched: a run killed from here on still counts them
            guardian_breaker.save(planned.breaker)
    for name, decision in planned.decisions.items():
        if decision.decision != "none":
            _record(report.hosts[name], decision)
    acting = sorted(n for n, d in planned.decisions.items() if d.decision == "quarantine")
    if options.check:
        for name in acting:
            report.hosts[name].guardian["decision"] = "would_quarantine"
            report.hosts[name].guardian["steps"].append(
                _step("quarantine", "would", "--check: nothing was changed")
            )
    elif acting:
        left = _act(options, report, planned.decisions, acting, settings, progress)
        if left:
            _uncount(left, moment)
    report.finished = now()
    return report


def act_vars(decision: guardian_plan.Decision) -> dict[str, Any]:
    """What playbooks/guardian_act.yml is given for one node (its ``guardian_actions`` entry)."""
    return {
        "reason": decision.reason,
        "classes": list(decision.classes),
        "checks": [name for names in decision.classes.values() for name in names],
        "remediation": "" if decision.replace_hardware else decision.remediation,
        "replace_hardware": decision.replace_hardware,
    }


# The check guardian_act.yml fails on a node it finds already out of service (a person's drain, the
# gate's): nothing of it was changed, and the guardian leaves it alone.
ALREADY_OUT = "guardian.already_out"


def _uncount(nodes: list[str], moment: datetime) -> None:
    """This run's breaker count of ``nodes`` taken back: the act found them already out of service (a
    person's drain the watch cannot see) and changed nothing of them."""
    stamp = guardian_escalation.iso(moment)
    with guardian_breaker.held():
        state = guardian_breaker.load()
        state.events = [e for e in state.events if not (e.get("node") in nodes and e.get("time") == stamp)]
        guardian_breaker.save(state)


def _act(
    options: GuardianOptions,
    report: Report,
    decisions: Mapping[str, guardian_plan.Decision],
    acting: list[str],
    settings: Mapping[str, guardian_settings.GuardianSettings],
    progress: runner.Progress | None,
) -> list[str]:
    """guardian_act.yml on the nodes to take out, then the gate on those it remediated; the nodes it
    found already out of service (left alone)."""
    if progress:
        progress(f"watch --act: taking out of service {', '.join(acting)}")
    try:
        result = runner.run_playbook(
            options.run_options(
                ACT_PLAYBOOK,
                limit=",".join(acting),
                forks=max(1, len(acting)),
                extravars={"guardian_actions": {name: act_vars(decisions[name]) for name in acting}},
            ),
            progress=progress,
        )
    except runner.Canceled as exc:
        for name in acting:
            host = report.hosts[name]
            stopped = exc.hosts.get(name) or runner.HostResult(name=name)
            host.guardian["steps"] = act_steps(stopped.tasks)
            host.guardian["steps"].append(_step("stopped", "stopped", f"{exc}: {stopped.where_stopped()}"))
            host.guardian["decision"] = "kept_out"
            host.status = "interrupted"
            host.message = f"watch --act was stopped: {stopped.where_stopped()}; {host.message}"
        return []
    remediated, left = [], []
    for name in acting:
        host = report.hosts[name]
        done = result.hosts.get(name) or runner.HostResult(name=name)
        host.guardian["steps"] = act_steps(done.tasks)
        out = next((c for c in done.checks if c.get("name") == ALREADY_OUT and not c.get("ok")), None)
        if out is not None:
            host.guardian["decision"] = "left_alone"
            host.guardian["why"] = str(out.get("message", ""))
            left.append(name)
            host.message = f"left_alone: {out.get('message', '')}"
        elif done.failed or done.unreachable:
            host.guardian["decision"] = "kept_out"
            host.message = f"kept_out: {done.failure_message()}; {host.message}"
        elif decisions[name].replace_hardware:
            host.guardian["decision"] = "replace_hardware"
        elif decisions[name].remediation:
            remediated.append(name)
    asked = options.interrupt
    if remediated and asked is not None and asked.requested:
        for name in remediated:
            report.hosts[name].guardian["steps"].append(
                _step(
                    "gate",
                    "stopped",
                    f"not started: gpufleet was asked to stop ({asked.signal_name}); the node stays drained",
                )
            )
            report.hosts[name].guardian["decision"] = "kept_out"
        return left
    if remediated:
        _gate(options, report, remediated, settings, progress)
    return left


def _gate(
    options: GuardianOptions,
    report: Report,
    nodes: list[str],
    settings: Mapping[str, guardian_settings.GuardianSettings],
    progress: runner.Progress | None,
) -> None:
    """The gate on the remediated nodes; its verdict on each, and a failed one's escalation, recorded in
    the node's history (playbooks/guardian_record.yml)."""
    started = now()
    gated = gate_cmd.gate(
        CommonOptions(
            options.inventory,
            ",".join(nodes),
            options.report_dir,
            options.vault_password_file,
            interrupt=options.interrupt,
        ),
        options.burn_in_seconds,
        progress,
    )
    events: dict[str, list[dict[str, Any]]] = {}
    for name in nodes:
        host = report.hosts[name]
        verdict = gated.hosts.get(name)
        passed = verdict is not None and verdict.status in ("ok", "changed")
        message = verdict.message if verdict is not None else "the gate did not reach it"
        failed = [c for c in (verdict.checks if verdict else []) if not c.get("ok")]
        host.guardian["steps"].append(_step("gate", "ok" if passed else "failed", message, started))
        classes = dict(host.guardian.get("classes") or {})
        cls = next(iter(classes), "")
        events[name] = [
            {
                "class": cls,
                "action": "gate_passed" if passed else "gate_failed",
                "outcome": "ok" if passed else "failed",
                "checks": [str(c.get("name")) for c in failed][:20],
                "detail": message[:200],
            }
        ]
        if passed:
            host.status = "changed"
            host.guardian["decision"] = "returned"
            host.guardian["steps"].append(_step("return", "ok", "the gate returned it to service"))
            host.message = f"returned: remediated ({host.guardian.get('remediation')}) and passed the gate"
            continue
        host.guardian["decision"] = "kept_out"
        host.message = (
            f"kept_out: remediated ({host.guardian.get('remediation')}), the gate failed: {message}"
        )
        # the remediation just done counts: a second one of the class in the window is replace hardware
        history = list(_reading(host).get("history") or [])
        done = {"class": cls, "action": host.guardian.get("remediation"), "time": started}
        escalation = guardian_escalation.escalate_node(
            [*history, done],
            classes,
            [*host.checks, *failed],
            datetime.now(UTC),
            settings.get(name) or guardian_settings.GuardianSettings(),
        )
        if escalation.replace:
            host.guardian["decision"] = "replace_hardware"
            host.message = f"replace_hardware: {escalation.why}; {host.message}"
            events[name].append(
                {
                    "class": cls,
                    "action": "replace_hardware",
                    "outcome": "ok",
                    "checks": [str(c.get("name")) for c in failed][:20],
                    "detail": escalation.why[:200],
                }
            )
    runner.run_playbook(
        options.run_options(
            RECORD_PLAYBOOK,
            limit=",".join(nodes),
            forks=max(1, len(nodes)),
            extravars={"guardian_events": events},
        ),
        progress=progress,
    )
