"""Runs gpufleet's playbooks through ansible-runner and keeps what the events say.

The report is built from runner events and stats, never from Ansible's stdout.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ansible_runner

REPO_DIR = Path(__file__).resolve().parents[2]
PLAYBOOK_DIR = REPO_DIR / "playbooks"
COLLECTIONS_DIR = REPO_DIR / ".gpufleet" / "collections"

Progress = Callable[[str], None]


class RunnerError(RuntimeError):
    """ansible-runner could not run the playbook at all (not a host failure)."""


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


@dataclass
class HostResult:
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

    def absorb(self, res: dict[str, Any]) -> None:
        """Takes `changes`, `checks`, `hints`, `reboot_required` from a result and its loop items."""
        for part in [res, *[r for r in res.get("results") or [] if isinstance(r, dict)]]:
            self.changes.extend(part.get("changes") or [])
            self.checks.extend(part.get("checks") or [])
            self.hints.extend(h for h in part.get("hints") or [] if h not in self.hints)
            self.reboot_required = self.reboot_required or bool(part.get("reboot_required"))


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


class _EventCollector:
    def __init__(self, progress: Progress | None) -> None:
        self.hosts: dict[str, HostResult] = {}
        self.progress = progress

    def host(self, name: str) -> HostResult:
        return self.hosts.setdefault(name, HostResult(name))

    def __call__(self, event: dict[str, Any]) -> bool:
        kind = event.get("event", "")
        data = event.get("event_data", {})
        name = data.get("host")
        if not name or not kind.startswith("runner_on_") or kind == "runner_on_start":
            return True
        host = self.host(name)
        res = data.get("res", {}) or {}
        task = data.get("task", "")
        outcome = kind.removeprefix("runner_on_")
        if outcome in ("ok", "failed"):
            host.absorb(res)
        if outcome == "ok":
            host.facts.update(res.get("ansible_facts", {}) or {})
            if res.get("changed"):
                host.changed += 1
        elif outcome == "failed" and not data.get("ignore_errors"):
            host.failed = True
        elif outcome == "unreachable":
            host.unreachable = True
        host.tasks.append(
            {"task": task, "action": data.get("task_action"), "outcome": outcome, "result": res}
        )
        if self.progress is not None:
            label = "changed" if outcome == "ok" and res.get("changed") else outcome
            message = res.get("msg", "") if outcome in ("failed", "unreachable") else ""
            self.progress(f"{name:<16} {label:<11} {task}" + (f": {message}" if message else ""))
        return True


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
    collector = _EventCollector(progress)
    with tempfile.TemporaryDirectory(prefix="gpufleet-runner-") as private:
        envvars = {
            "ANSIBLE_CONFIG": str(REPO_DIR / "ansible.cfg"),
            "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS_DIR),
            "ANSIBLE_ROLES_PATH": str(REPO_DIR / "roles"),
            "ANSIBLE_FORKS": str(options.forks),
            "ANSIBLE_NOCOLOR": "1",
            "PATH": os.environ.get("PATH", ""),
        }
        result = ansible_runner.run(
            private_data_dir=private,
            project_dir=str(REPO_DIR),
            playbook=str(playbook),
            inventory=str(options.inventory.resolve()),
            limit=options.limit,
            tags=options.tags,
            cmdline=" ".join(cmdline) or None,
            extravars=options.extravars or None,
            envvars=envvars,
            event_handler=collector,
            quiet=True,
            json_mode=True,
            rotate_artifacts=1,
            suppress_env_files=True,
        )
        stats = result.stats or {}
    for name in set().union(*(stats.get(k, {}) for k in ("ok", "failures", "dark", "changed", "skipped"))):
        host = collector.host(str(name))
        host.failed = host.failed or bool(stats.get("failures", {}).get(name))
        host.unreachable = host.unreachable or bool(stats.get("dark", {}).get(name))
    if result.status not in ("successful", "failed") and not collector.hosts:
        raise RunnerError(
            f"ansible-runner ended with status {result.status!r} (rc {result.rc}) and no host results"
        )
    return RunResult(rc=int(result.rc or 0), status=str(result.status), hosts=collector.hosts)
