"""A run's hosts from ansible-runner's events: the one source of every gpufleet report.

The same events come from three places, so each gives the same report: gpufleet's own run
(ansible-runner's event handler, in this process), an ansible-runner artifact directory
(``job_events/*.json``: what ``ansible-runner process`` writes for a run streamed from an execution
node), and AWX's job events (the same event shape, through its API). Whatever a report needs travels
in the module results (``event_data.res``), never in a file left on the machine that ran Ansible.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from gpufleet import catalog, checks

# ansible-runner's task result events and what gpufleet calls them.
OUTCOMES = {
    "runner_on_ok": "ok",
    "runner_on_failed": "failed",
    "runner_on_unreachable": "unreachable",
    "runner_on_skipped": "skipped",
}
STATS_EVENT = "playbook_on_stats"
# a task begins on a host (ansible-runner's callback, AWX's job events alike): where a stopped run was
START_EVENT = "runner_on_start"

# ansible-runner's callback (and so AWX's job events) passes on an empty result in place of one
# longer than MAX_EVENT_RES characters (700000 unless set). Every result Ansible gives a task has at
# least ``changed``, so an empty one is a result nobody saw: failed, never an ok with nothing judged.
DROPPED_RESULT = (
    "its result was larger than ansible-runner passes on (MAX_EVENT_RES, %s characters) and came back "
    "empty: gpufleet cannot tell what the task found (fail closed); a module that returns this much is "
    "carrying a tool's output it should have refused"
)
_RESULT_EVENTS = ("runner_on_ok", "runner_on_failed")

# What gpufleet's modules report beyond Ansible's own keys (the module contract,
# module_utils/core/results.py).
_KEYS = ("changes", "checks", "hints", "reboot_required")

# The plays that check every role's inputs before anything changes are named so (provision.yml,
# post_maintenance.yml): a host that fails there was refused for its configuration.
INPUTS_PLAY = "Check every role's inputs"

# How a role's task is named in a host's tasks (as Ansible's own Task.get_name() names it).
_DRAIN_ROLE_TASK = "gpufleet.node.drain : "
# The drain role's tasks that return the node (roles/drain/tasks/undrain.yml): they undo a drain.
_UNDRAIN_FILE = "/drain/tasks/undrain.yml"


def task_name(data: dict[str, Any]) -> str:
    """'<role FQCN> : <task>' for a role's task, else the task's name (its action when unnamed)."""
    role = data.get("resolved_role") or data.get("role")
    task = str(data.get("task") or data.get("task_action") or "")
    return f"{role} : {task}" if role else task


def dropped_result(kind: str, data: dict[str, Any]) -> bool:
    """Whether ansible-runner dropped this task result for its size (DROPPED_RESULT)."""
    return kind in _RESULT_EVENTS and "res" in data and data["res"] == {}


def task_entry(kind: str, data: dict[str, Any]) -> dict[str, Any]:
    """One task's result on one host, from its event: outcome, message, and gpufleet's own keys
    (a loop's items flattened into the task's). A result ansible-runner dropped is a failure naming
    why (dropped_result)."""
    res = data.get("res") or {}
    if not isinstance(res, dict):
        res = {}
    parts = [res, *[r for r in res.get("results") or [] if isinstance(r, dict)]]
    entry: dict[str, Any] = {
        "task": task_name(data),
        "action": data.get("resolved_action") or data.get("task_action") or "",
        "outcome": OUTCOMES[kind],
        "changed": bool(res.get("changed")),
        "play": str(data.get("play") or ""),
        "msg": checks.task_message(res),
    }
    for key in _KEYS:
        values: list[Any] = [p[key] for p in parts if p.get(key)]
        if values:
            entry[key] = any(values) if key == "reboot_required" else [v for vs in values for v in vs]
    if res.get("input_error"):
        entry["input_error"] = True
    if res.get("override"):
        entry["override"] = res["override"]
    diffs = [p["diff"] for p in parts if p.get("diff")]
    if diffs:
        entry["diff"] = diffs
    if dropped_result(kind, data):
        entry.update(outcome="failed", msg=DROPPED_RESULT % os.environ.get("MAX_EVENT_RES", "700000"))
    elif kind == "runner_on_failed" and data.get("ignore_errors"):
        entry["ignored"] = True
    for key in ("start", "end"):
        # when the task began and ended on this host (ansible-runner's ISO times, UTC): the guardian's
        # report times each step it took with them
        if data.get(key):
            entry[key] = str(data[key])
    if data.get("task_path"):
        # the task's file (ansible-runner's task_path less its line): the drain role drains and undrains
        entry["file"] = str(data["task_path"]).rsplit(":", 1)[0]
    return entry


@dataclass
class HostResult:
    """One host's run, as its task result events told it."""

    name: str
    unreachable: bool = False
    failed: bool = False
    changed: int = 0
    facts: dict[str, Any] = field(default_factory=dict)
    tasks: list[dict[str, Any]] = field(default_factory=list)
    changes: list[dict[str, Any]] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)
    hints: list[str] = field(default_factory=list)
    reboot_required: bool = False
    # the task the host had started (ansible-runner's runner_on_start) and had no result of yet, its play
    under_way: str = ""
    under_way_play: str = ""

    @classmethod
    def from_tasks(cls, name: str, tasks: list[dict[str, Any]]) -> HostResult:
        """A host from task entries already made (task_entry's shape)."""
        host = cls(name=name)
        for task in tasks:
            host.add(task)
        return host

    def add(self, task: dict[str, Any]) -> None:
        """Counts one task entry (task_entry) into the host's outcome and gpufleet's keys."""
        self.tasks.append(task)
        self.under_way = ""  # its result ends the task it was in
        outcome = task["outcome"]
        if outcome == "ok" and task.get("changed"):
            self.changed += 1
        self.failed = self.failed or (outcome == "failed" and not task.get("ignored"))
        self.unreachable = self.unreachable or outcome == "unreachable"
        self.changes.extend(task.get("changes") or [])
        self.checks.extend(task.get("checks") or [])
        self.hints.extend(h for h in task.get("hints") or [] if h not in self.hints)
        self.reboot_required = self.reboot_required or bool(task.get("reboot_required"))

    def failure_message(self) -> str:
        """What stopped the host: where it became unreachable, or '<task>: <message>' of the failed one."""
        if self.unreachable:
            task: dict[str, Any] = next((t for t in self.tasks if t["outcome"] == "unreachable"), {})
            reason = str(task.get("msg") or "").strip()
            return f"became unreachable at '{task.get('task', '?')}'" + (f": {reason}" if reason else "")
        task = next((t for t in self.tasks if t["outcome"] == "failed" and not t.get("ignored")), {})
        return f"{task.get('task', '?')}: {task.get('msg') or 'failed'}"

    def refused_for_input(self) -> bool:
        """Whether what stopped the host is its inputs: a task of the plays that check every role's
        inputs before anything changes, or a module that said so (``input_error``)."""
        failed = next((t for t in self.tasks if t["outcome"] == "failed" and not t.get("ignored")), None)
        if failed is None:
            return False
        return bool(failed.get("input_error")) or str(failed.get("play", "")).startswith(INPUTS_PLAY)

    def drain_task(self) -> str | None:
        """The drain role's last task that changed the node in this run (its record, then the drain in
        the scheduler), None when none did (method none changes nothing; a node refused before the
        drain play was never drained)."""
        done = [
            str(t["task"])
            for t in self.tasks
            if t["outcome"] == "ok"
            and t.get("changed")
            and str(t.get("task", "")).startswith(_DRAIN_ROLE_TASK)
            and not str(t.get("file", "")).endswith(_UNDRAIN_FILE)
        ]
        return done[-1] if done else None

    def drained(self) -> bool:
        """Whether the drain role took the node out of its scheduler in this run."""
        return self.drain_task() is not None

    def where_stopped(self) -> str:
        """Where a run stopped before its end left the host, as far as its events tell: the task it was
        in (started, no result), else none (the last it finished named; a leaf whose read was done had
        finished), and the drain task that took it out of service (named), or that none had."""
        if self.under_way:
            stopped = f"stopped in '{self.under_way}', under way"
        elif not self.tasks:
            return "no task of it had finished: it may be drained if the drain was under way"
        elif self.only_read_leaf():
            return "its part of the run (the leaf's read) had finished: no task of it was under way"
        else:
            stopped = f"no task of it was under way (the last it finished: '{self.tasks[-1]['task']}')"
        if self.only_read_leaf() or self.under_way_play.startswith(catalog.LEAF_READ_PLAY):
            return stopped  # a leaf read: nothing of it drains
        drain = self.drain_task()
        if drain is not None:
            return f"{stopped}; left drained by '{drain}'"
        return f"{stopped}; no drain task of it had finished: in service unless the drain was under way"

    def status(self, read_only: bool) -> str:
        """checks.host_status of everything this host did: its changes are drift when the run only
        read (``read_only``: --check, a status display of a read) or the host is a leaf only read (a
        run on the nodes reads the leaves, gpufleet switch changes them)."""
        return checks.host_status(
            unreachable=self.unreachable,
            failed=self.failed,
            checks=self.checks,
            changes=self.changes,
            changed=bool(self.changed),
            check_mode=read_only or self.only_read_leaf(),
        )

    def only_read_leaf(self) -> bool:
        """Whether all this host did is the leaf switches' read (a leaf in a run on the nodes: it
        changed nothing, so what differs from its profile is drift)."""
        return bool(self.tasks) and all(
            str(t.get("play", "")).startswith(catalog.LEAF_READ_PLAY) for t in self.tasks
        )


class Collector:
    """Every host's HostResult from a run's events, in the order they came (``add`` each one)."""

    def __init__(self) -> None:
        self.hosts: dict[str, HostResult] = {}
        # playbook_on_stats' event data: the run reached its end (a run stopped before has none)
        self.stats: dict[str, Any] | None = None

    def add(self, event: dict[str, Any]) -> dict[str, Any] | None:
        """Takes one event; returns the task entry it added to a host, if it was a task result."""
        kind = event.get("event", "")
        data = event.get("event_data") or {}
        if kind == STATS_EVENT:
            self.stats = data
            # a host the stats name with no task result (every task skipped by a condition on the play)
            for counts in ("ok", "failures", "dark", "skipped", "changed", "processed"):
                for name in data.get(counts) or {}:
                    self.hosts.setdefault(name, HostResult(name=name))
            return None
        name = data.get("host")
        if name and kind == START_EVENT:
            host = self.hosts.setdefault(name, HostResult(name=name))
            host.under_way, host.under_way_play = task_name(data), str(data.get("play") or "")
            return None
        if not name or kind not in OUTCOMES:
            return None
        entry = task_entry(kind, data)
        host = self.hosts.setdefault(name, HostResult(name=name))
        host.add(entry)
        res = data.get("res") or {}
        facts = res.get("ansible_facts") if isinstance(res, dict) else None
        if isinstance(facts, dict):
            host.facts.update({k: v for k, v in facts.items() if k.startswith("gpufleet_")})
        return entry

    def finished(self) -> bool:
        return self.stats is not None
