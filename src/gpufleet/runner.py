"""Runs gpufleet's playbooks through ansible-runner and keeps what the events say.

The report is built from runner events and stats, never from Ansible's stdout.
"""

from __future__ import annotations

import getpass
import os
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import ansible_runner

from gpufleet import catalog, events, interrupt, procs, runlock, workdir
from gpufleet.events import INPUTS_PLAY as INPUTS_PLAY
from gpufleet.events import HostResult as HostResult
from gpufleet.interrupt import Interrupt
from gpufleet.progress import Display

REPO_DIR = Path(__file__).resolve().parents[2]
# the Ansible configuration of every run gpufleet starts (its collection, roles and callbacks)
ANSIBLE_CFG = REPO_DIR / "ansible.cfg"
PLAYBOOK_DIR = REPO_DIR / "playbooks"
COLLECTIONS_DIR = REPO_DIR / ".gpufleet" / "collections"

# what a run prints while it goes (progress.py): gpufleet's commands share one
Progress = Display


class RunnerError(RuntimeError):
    """ansible-runner could not run the playbook at all (not a host failure)."""


class Canceled(RunnerError):
    """The playbook was stopped by a second SIGINT/SIGTERM before it ended (no playbook stats came);
    ``hosts`` holds what the events said of each host up to then (its tasks and outcomes)."""

    def __init__(self, message: str, hosts: dict[str, HostResult] | None = None) -> None:
        super().__init__(message)
        self.hosts = hosts or {}


# The playbooks whose first play reads every leaf switch (roles/switch_qos read): each node judges its
# links against the leaves of its cabling, so a --limit to some nodes still reads the leaves.
READS_SWITCHES = catalog.reads_leaves()
SWITCH_GROUP = "leaf_switches"
# The playbooks that change nothing (what they would change is drift, not a change).
READ_ONLY = catalog.read_only()
# The environment variable that marks every process of one run (its private directory's path).
RUN_MARKER = "GPUFLEET_RUN"


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
class Target:
    """What a command runs against, whichever it is (its options extend this): the inventory, the
    --limit, where its report goes and the vault password file."""

    inventory: Path
    limit: str | None
    report_dir: Path
    vault_password_file: Path | None = None
    # what the operator asked by signal during the command (None: no handler, nothing asked)
    interrupt: Interrupt | None = field(default=None, compare=False, kw_only=True)

    def run_options(self, playbook: str, **settings: Any) -> RunOptions:
        """RunOptions for ``playbook`` against this target: its inventory, its vault password file
        and its --limit unless ``settings`` (RunOptions' other fields) name another."""
        settings.setdefault("limit", self.limit)
        settings.setdefault("interrupt", self.interrupt)
        return RunOptions(
            playbook=playbook,
            inventory=self.inventory,
            vault_password_file=self.vault_password_file,
            **settings,
        )


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
    # take the node's run lock even from another run's record (that run is gone): --break-lock
    break_lock: bool = False
    # the signals of this run (interrupt.installed): its cancel callback; None: never canceled
    interrupt: Interrupt | None = field(default=None, compare=False, kw_only=True)


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


class _Events:
    """ansible-runner's event handler: every event to the run's Collector (the report's one source)
    and to the progress display.

    It returns False: ansible-runner then writes no job_events file (gpufleet has the events in
    process; writing ~200 event files cost a 32-node drift 0.7 CPU-s, bench/).
    """

    def __init__(
        self,
        display: Progress | None,
        playbook: str,
        on_start: Callable[[], None] = lambda: None,
        read_only: bool = False,
    ) -> None:
        self.display = display
        self.playbook = playbook
        self.read_only = read_only
        self.on_start = on_start
        self.collector = events.Collector()

    def __call__(self, event: dict[str, Any]) -> bool:
        if event.get("event") == "playbook_on_start":
            self.on_start()
            if self.display is not None:
                self.display.run_started(self.playbook, self.read_only)
        entry = self.collector.add(event)
        if self.display is not None:
            self.display.event(event, entry, self.collector.hosts)
        return False


def own_path(path: str) -> str:
    """PATH with this installation's bin directory first, so `.venv/bin/gpufleet` runs the
    ansible-playbook installed beside it, also from a shell where the venv is not activated."""
    own = str(Path(sys.executable).parent)
    return os.pathsep.join([own, *(p for p in path.split(os.pathsep) if p and p != own)])


# ANSIBLE_DEBUG makes every Ansible process (a playbook's forked workers too) print its trace on stdout,
# the stream ansible-runner reads the events from, and module arguments with it: never in a run whose
# events make a report (a lost task result must not read as a host with fewer checks).
NO_DEBUG = {"ANSIBLE_DEBUG": "False"}
# An Ansible tool whose stdout gpufleet parses (ansible-inventory --list's JSON, ansible-playbook
# --list-tags) prints a banner before it at any ANSIBLE_VERBOSITY above 0: it runs at 0. A playbook's
# run keeps the user's verbosity (its verbose lines are events of their own, and its output's tail is
# what a failed run's error quotes).
PARSED_OUTPUT = {**NO_DEBUG, "ANSIBLE_VERBOSITY": "0", "ANSIBLE_NOCOLOR": "1"}


def environment(forks: int) -> dict[str, str]:
    """What ansible-playbook needs to run gpufleet's playbooks, here or on an execution node (the
    environment of an ansible-runner private data directory, env/envvars)."""
    return {
        "ANSIBLE_CONFIG": str(ANSIBLE_CFG),
        "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS_DIR),
        "ANSIBLE_ROLES_PATH": str(REPO_DIR / "roles"),
        "ANSIBLE_FORKS": str(forks),
        "ANSIBLE_NOCOLOR": "1",
        # ansible-runner turns host-key checking off unless told; gpufleet never does.
        "ANSIBLE_HOST_KEY_CHECKING": "True",
        "PATH": own_path(os.environ.get("PATH", "")),
        **NO_DEBUG,
    }


def tool_environment(**settings: str) -> dict[str, str]:
    """The environment of an Ansible command-line tool whose stdout gpufleet parses: the user's, with
    gpufleet's own installation and settings (environment()), the caller's ``settings``, and
    PARSED_OUTPUT over all of them (whatever the user's ANSIBLE_VERBOSITY and ANSIBLE_DEBUG)."""
    return {**os.environ, **environment(forks=1), **settings, **PARSED_OUTPUT}


# The tasks that take and give back a node's run lock (playbooks/tasks/hold_node.yml, release_node.yml).
HOLD_TASK = "Hold the node for this run"
RELEASE_TASK = "Release the node held for this run"
_HOLDER: dict[str, Any] = {}


def run_holder(command: str) -> dict[str, Any]:
    """This gpufleet process as the holder of the nodes' run locks: one id for every playbook it runs
    (the gate's stop after a second signal holds the gate's nodes again), the user, controller, pid
    and start that another controller's refusal names."""
    if not _HOLDER:
        pid = os.getpid()
        _HOLDER.update(
            id=f"{socket.gethostname()}:{pid}:{runlock.process_start(pid)}",
            user=getpass.getuser(),
            controller=socket.getfqdn(),
            pid=pid,
            started=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        )
    return {**_HOLDER, "command": command}


def still_held(hosts: dict[str, HostResult]) -> list[str]:
    """The hosts whose run lock this run took and did not give back (it failed on them, or stopped)."""

    def did(host: HostResult, task: str) -> bool:
        return any(t["task"] == task and t["outcome"] == "ok" for t in host.tasks)

    return sorted(n for n, h in hosts.items() if did(h, HOLD_TASK) and not did(h, RELEASE_TASK))


def run_playbook(options: RunOptions, progress: Progress | None = None) -> RunResult:
    """One playbook; a playbook that holds its nodes (catalog: holds_as) runs as this process's holder,
    and the nodes it still holds at its end are released (release_lock.yml), after a second signal too."""
    holds_as = catalog.PLAYBOOKS[options.playbook].holds_as if options.playbook in catalog.PLAYBOOKS else ""
    if not holds_as or options.check:
        return _run(options, progress)
    lock_vars: dict[str, Any] = {"gpufleet_run": run_holder(holds_as)}
    if options.break_lock:
        lock_vars["gpufleet_break_lock"] = True
    options = replace(options, extravars={**options.extravars, **lock_vars})
    try:
        result = _run(options, progress)
    except Canceled as exc:
        # a fresh signal state: the second signal that stopped the run must not stop this one too
        with interrupt.installed() as fresh:
            _release(replace(options, interrupt=fresh), still_held(exc.hosts), progress)
        raise
    _release(options, still_held(result.hosts), progress)
    return result


def _release(options: RunOptions, names: list[str], progress: Progress | None) -> None:
    if not names:
        return
    if progress is not None:
        progress(f"releasing the run lock of {', '.join(names)}")
    limit = ",".join(names)
    release = replace(options, playbook="release_lock.yml", limit=limit, tags=None, break_lock=False)
    try:
        result = _run(release, None)
    except RunnerError as exc:
        if progress is not None:
            progress(f"the run lock of {', '.join(names)} may remain: {exc}")
        return
    kept = [n for n, h in result.hosts.items() if h.failed or h.unreachable]
    if kept and progress is not None:
        progress(f"the run lock of {', '.join(kept)} remains (release failed): the next run names it")


def _never() -> bool:
    """The cancel callback of a run no signal handler watches: it is never canceled by gpufleet."""
    return False


def _signal_of(asked: Interrupt | None) -> str:
    return (asked.signal_name if asked is not None else None) or "a signal"


def _run(options: RunOptions, progress: Progress | None = None) -> RunResult:
    try:
        workdir.check_temp_dir()
    except workdir.TempDirTooLong as exc:
        raise RunnerError(str(exc)) from None
    ensure_collection_link()
    playbook = PLAYBOOK_DIR / options.playbook
    if not playbook.exists():
        raise RunnerError(f"playbook {playbook} does not exist")
    if not options.inventory.exists():
        raise RunnerError(
            f"inventory {options.inventory} does not exist (for the sim fleet: gpufleet-sim up)"
        )
    cmdline = []
    if options.check:
        cmdline.append("--check")
    if options.diff:
        cmdline.append("--diff")
    if options.vault_password_file is not None:
        cmdline += ["--vault-password-file", str(options.vault_password_file)]
    with workdir.private_dir() as private:
        handler = _Events(
            progress,
            options.playbook,
            on_start=lambda: workdir.forget_environment(private),
            read_only=options.check or options.playbook in READ_ONLY,
        )
        asked = options.interrupt
        # RUN_MARKER marks the run's processes: a canceled run's workers are found by it (procs.stop_marked)
        envvars = {**environment(options.forks), RUN_MARKER: str(private)}
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
            event_handler=handler,
            # Our own: ansible-runner's default handler kills the playbook at the first signal.
            cancel_callback=asked.stop_now if asked is not None else _never,
            quiet=True,
            json_mode=True,
            rotate_artifacts=1,
            suppress_env_files=True,
        )
        collected = handler.collector
        if progress is not None:
            progress.run_finished(collected)
        if not collected.finished():
            if result.status == "canceled":
                # ansible-runner killed ansible-playbook's process group; ansible-core's workers lead
                # their own, so they would go on (blocked on a pipe) without their playbook
                procs.stop_marked(f"{RUN_MARKER}={private}")
                raise Canceled(
                    f"{options.playbook} was stopped by {_signal_of(asked)} before it ended",
                    collected.hosts,
                )
            tail = _stdout_tail(result)
            raise RunnerError(
                f"ansible-playbook ended with status {result.status!r} (rc {result.rc}): {tail}"
            )
    return RunResult(rc=int(result.rc or 0), status=str(result.status), hosts=collected.hosts)


def _stdout_tail(result: Any) -> str:
    try:
        text = str(result.stdout.read())
    except (OSError, AttributeError):
        return "no output"
    lines = [line for line in text.splitlines() if line.strip()]
    return " ".join(lines[-5:]) or "no output"
