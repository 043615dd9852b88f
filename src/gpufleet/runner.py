"""Runs gpufleet's playbooks through ansible-runner and keeps what the events say.

The report is built from runner events and stats, never from Ansible's stdout.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ansible_runner

from gpufleet import checks, interrupt, procs, workdir

REPO_DIR = Path(__file__).resolve().parents[2]
PLAYBOOK_DIR = REPO_DIR / "playbooks"
COLLECTIONS_DIR = REPO_DIR / ".gpufleet" / "collections"

Progress = Callable[[str], None]


class RunnerError(RuntimeError):
    """ansible-runner could not run the playbook at all (not a host failure)."""


class Canceled(RunnerError):
    """The playbook was stopped by a second SIGINT/SIGTERM before it ended. The callback wrote no
    results; ``hosts`` holds what the events said of each host up to then (its tasks and outcomes)."""

    def __init__(self, message: str, hosts: dict[str, HostResult] | None = None) -> None:
        super().__init__(message)
        self.hosts = hosts or {}


# The playbooks whose first play reads every leaf switch (roles/switch_qos read): each node judges its
# links against the leaves of its cabling, so a --limit to some nodes still reads the leaves.
READS_SWITCHES = frozenset(("provision.yml", "drift.yml", "drift_fix.yml", "post_maintenance.yml"))
SWITCH_GROUP = "leaf_switches"


def with_switches(limit: str) -> str:
    """``limit`` and the leaf switches. Ansible splits a pattern on commas when it has any (then a
    term's colon is part of a name), else on colons: the union is written in the limit's own separator."""
    return f"{limit},{SWITCH_GROUP}" if "," in limit else f"{limit}:{SWITCH_GROUP}"


def run_limit(playbook: str, limit: str | None) -> str | None:
    """The limit handed to ansible: ``limit``, and the leaf switches for a playbook that reads them."""
    if limit is None or playbook not in READS_SWITCHES:
        return limit
    return with_switches(limit)


@dataclass(frozen=True)
class RunOptions:
    playbook: str
    inventory: Path
    limit: str | None = None
    tags: str | None = None
    check: bool = False
    diff: bool = False
    extravars: dict[str, Any] = field(default_factory=dict)
    forks: int = 32
    vault_password_file: Path | None = None


@dataclass
class HostResult:
    """One host's run, as the fleet_report callback plugin recorded it."""

    name: str
    unreachable: bool = False
    failed: bool = False
    changed: int = 0
    facts: dict[str, Any] = field(default_factory=dict)
    tasks: list[dict[str, Any]] = field(default_factory=list)
    # What gpufleet's modules report beyond Ansible's own keys (the module contract):
    changes: list[dict[str, Any]] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)
    hints: list[str] = field(default_factory=list)
    reboot_required: bool = False

    @classmethod
    def from_callback(cls, name: str, data: dict[str, Any]) -> HostResult:
        host = cls(
            name=name,
            unreachable=bool(data.get("unreachable")),
            failed=bool(data.get("failed")),
            changed=int(data.get("changed", 0)),
            facts=dict(data.get("facts") or {}),
            tasks=list(data.get("tasks") or []),
        )
        for task in host.tasks:
            host.changes.extend(task.get("changes") or [])
            host.checks.extend(task.get("checks") or [])
            host.hints.extend(h for h in task.get("hints") or [] if h not in host.hints)
            host.reboot_required = host.reboot_required or bool(task.get("reboot_required"))
        return host

    def failure_message(self) -> str:
        """What stopped the host: where it became unreachable, or '<task>: <message>' of the failed one."""
        if self.unreachable:
            task: dict[str, Any] = next((t for t in self.tasks if t["outcome"] == "unreachable"), {})
            reason = str(task.get("msg") or "").strip()
            return f"became unreachable at '{task.get('task', '?')}'" + (f": {reason}" if reason else "")
        task = next((t for t in self.tasks if t["outcome"] == "failed"), {})
        return f"{task.get('task', '?')}: {task.get('msg') or 'failed'}"

    def refused_for_input(self) -> bool:
        """Whether what stopped the host is its inputs: a task of the plays that check every role's
        inputs before anything changes, or a module that said so (``input_error``)."""
        failed = next((t for t in self.tasks if t["outcome"] == "failed"), None)
        if failed is None:
            return False
        return bool(failed.get("input_error")) or str(failed.get("play", "")).startswith(INPUTS_PLAY)

    def drained(self) -> bool:
        """Whether the drain role took the node out of its scheduler in this run (method none changes
        nothing; a node refused before the drain play was never drained)."""
        return any(
            t["outcome"] == "ok" and t.get("changed") and str(t.get("task", "")).startswith(_DRAIN_ROLE_TASK)
            for t in self.tasks
        )


# The plays that check every role's inputs before anything changes are named so (provision.yml,
# post_maintenance.yml): a host that fails there was refused for its configuration.
INPUTS_PLAY = "Check every role's inputs"

# How the fleet_report callback names the drain role's tasks.
_DRAIN_ROLE_TASK = "gpufleet.node.drain : "


@dataclass
class RunResult:
    rc: int
    status: str
    hosts: dict[str, HostResult]


def ensure_collection_link() -> None:
    """Makes gpufleet.node.* resolve from this checkout (ansible.cfg's collections_path)."""
    link = COLLECTIONS_DIR / "ansible_collections" / "gpufleet" / "node"
    if not link.exists():
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(REPO_DIR, target_is_directory=True)


class _ProgressPrinter:
    """ansible-runner event handler: one line per host and task while the run goes on.

    It returns False: ansible-runner then writes no job_events file. gpufleet reads its results from
    its callback's file, and writing ~200 event files cost a 32-node drift 0.7 CPU-s (bench/).
    """

    def __init__(self, progress: Progress | None, on_start: Callable[[], None] = lambda: None) -> None:
        self.progress = progress
        self.on_start = on_start
        # each host's tasks as the events told them, in the callback's shape: what a run stopped
        # before its end (no callback results) still knows of its hosts
        self.seen: dict[str, list[dict[str, Any]]] = {}

    def __call__(self, event: dict[str, Any]) -> bool:
        kind = event.get("event", "")
        if kind == "playbook_on_start":
            self.on_start()
        data = event.get("event_data", {})
        name = data.get("host")
        if not name or kind not in _OUTCOMES:
            return False
        res = data.get("res", {}) or {}
        role = data.get("resolved_role") or data.get("role")
        self.seen.setdefault(name, []).append(
            {
                "task": f"{role} : {data.get('task', '')}" if role else data.get("task", ""),
                "outcome": _OUTCOMES[kind],
                "changed": bool(res.get("changed")),
                "msg": checks.task_message(res),
            }
        )
        if self.progress is None:
            return False
        label = _OUTCOMES[kind]
        if kind == "runner_on_ok" and res.get("changed"):
            label = "changed"
        elif kind == "runner_on_ok" and res.get("changes"):
            # A read-only comparison (drift) found settings that differ: it changed nothing.
            label = "drifted"
        message = checks.task_message(res) if label in ("failed", "unreachable") else _tally(res)
        self.progress(f"{name:<16} {label:<11} {data.get('task', '')}" + (f": {message}" if message else ""))
        return False


def _tally(res: dict[str, Any]) -> str:
    """'3 settings, 1 failed check' from a gpufleet module's result ('' when it has neither)."""
    changes = len(res.get("changes") or [])
    failed = sum(1 for c in res.get("checks") or [] if isinstance(c, dict) and not c.get("ok"))
    parts = []
    if changes:
        parts.append(f"{changes} setting{'s' if changes != 1 else ''}")
    if failed:
        parts.append(f"{failed} failed check{'s' if failed != 1 else ''}")
    return ", ".join(parts)


_OUTCOMES = {
    "runner_on_ok": "ok",
    "runner_on_failed": "failed",
    "runner_on_unreachable": "unreachable",
    "runner_on_skipped": "skipped",
}


def own_path(path: str) -> str:
    """PATH with this installation's bin directory first, so `.venv/bin/gpufleet` runs the
    ansible-playbook installed beside it, also from a shell where the venv is not activated."""
    own = str(Path(sys.executable).parent)
    return os.pathsep.join([own, *(p for p in path.split(os.pathsep) if p and p != own)])


def run_playbook(options: RunOptions, progress: Progress | None = None) -> RunResult:
    ensure_collection_link()
    playbook = PLAYBOOK_DIR / options.playbook
    if not playbook.exists():
        raise RunnerError(f"playbook {playbook} does not exist")
    if not options.inventory.exists():
        raise RunnerError(
            f"inventory {options.inventory} does not exist (for the sim fleet: gpufleet sim up)"
        )
    cmdline = []
    if options.check:
        cmdline.append("--check")
    if options.diff:
        cmdline.append("--diff")
    if options.vault_password_file is not None:
        cmdline += ["--vault-password-file", str(options.vault_password_file)]
    with workdir.private_dir() as private:
        results_file = private / "results.json"
        events = _ProgressPrinter(progress, on_start=lambda: workdir.forget_environment(private))
        envvars = {
            "ANSIBLE_CONFIG": str(REPO_DIR / "ansible.cfg"),
            "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS_DIR),
            "ANSIBLE_ROLES_PATH": str(REPO_DIR / "roles"),
            "ANSIBLE_FORKS": str(options.forks),
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_CALLBACKS_ENABLED": "gpufleet.node.fleet_report",
            "GPUFLEET_RESULTS_FILE": str(results_file),
            # ansible-runner turns host-key checking off unless told; gpufleet never does.
            "ANSIBLE_HOST_KEY_CHECKING": "True",
            "PATH": own_path(os.environ.get("PATH", "")),
        }
        result = ansible_runner.run(
            private_data_dir=str(private),
            project_dir=str(REPO_DIR),
            playbook=str(playbook),
            inventory=str(options.inventory.resolve()),
            limit=run_limit(options.playbook, options.limit),
            tags=options.tags,
            cmdline=" ".join(cmdline) or None,
            extravars=options.extravars or None,
            envvars=envvars,
            event_handler=events,
            # Our own: ansible-runner's default handler kills the playbook at the first signal.
            cancel_callback=interrupt.STATE.stop_now,
            quiet=True,
            json_mode=True,
            rotate_artifacts=1,
            suppress_env_files=True,
        )
        if not results_file.exists():
            if result.status == "canceled":
                # ansible-runner killed ansible-playbook's process group; ansible-core's workers lead
                # their own, so they would go on (blocked on a pipe) without their playbook
                procs.stop_marked(f"GPUFLEET_RESULTS_FILE={results_file}")
                raise Canceled(
                    f"{options.playbook} was stopped by {interrupt.STATE.signal_name} before it ended",
                    {
                        name: HostResult.from_callback(name, {"tasks": tasks})
                        for name, tasks in events.seen.items()
                    },
                )
            tail = _stdout_tail(result)
            raise RunnerError(
                f"ansible-playbook ended with status {result.status!r} (rc {result.rc}): {tail}"
            )
        recorded = json.loads(results_file.read_text(encoding="utf-8"))
    hosts = {name: HostResult.from_callback(name, data) for name, data in recorded["hosts"].items()}
    return RunResult(rc=int(result.rc or 0), status=str(result.status), hosts=hosts)


def _stdout_tail(result: Any) -> str:
    try:
        text = str(result.stdout.read())
    except (OSError, AttributeError):
        return "no output"
    lines = [line for line in text.splitlines() if line.strip()]
    return " ".join(lines[-5:]) or "no output"
