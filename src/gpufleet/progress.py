"""What a run prints while it goes, sized for a fleet.

On a terminal: one live line (the play, how many hosts are through its current task, how many
changed, failed or became unreachable of the total, the elapsed time), and a line of its own for a
host only when it fails or becomes unreachable. Without a terminal (CI, AWX's job log, a systemd
journal): each host's result once, a line per host. ``--verbose``: a line per host and task, as
Ansible prints them. Everything goes to stderr; the report (stdout, files) is the record.
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TextIO

from gpufleet import catalog, checks, events
from gpufleet.printable import printable

_CLEAR = "\r\x1b[K"
# the live line is redrawn at most this often (a 1,000-host run sends thousands of events a second)
_REDRAW_S = 0.1


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}:{secs:02d}"


def tally(res: dict[str, Any]) -> str:
    """'3 settings, 1 failed check' from a gpufleet module's result ('' when it has neither)."""
    changes = len(res.get("changes") or [])
    failed = sum(1 for c in res.get("checks") or [] if isinstance(c, dict) and not c.get("ok"))
    parts = []
    if changes:
        parts.append(f"{changes} setting{'s' if changes != 1 else ''}")
    if failed:
        parts.append(f"{failed} failed check{'s' if failed != 1 else ''}")
    return ", ".join(parts)


# A host's status from its run's results.
StatusOf = Callable[[events.HostResult], str]


@dataclass(frozen=True)
class Judges:
    """How the commands' reports judge a run's hosts (commands.registry.console_judges(): each command's
    own judges): given to the Display, not imported here, since the commands import this module."""

    # a playbook's (and read-only run's) host status, as its command's report gives it
    status_of: Callable[[str, bool], StatusOf]
    # what a report judges across a run's hosts before each host (drift: the odd node out)
    across_hosts: Mapping[str, Callable[[Mapping[str, events.HostResult]], None]]


def generic_status(read_only: bool) -> StatusOf:
    """For a run no report judges (none here yet: a Display fed events by hand): HostResult.status."""

    def status(host: events.HostResult) -> str:
        return host.status(read_only)

    return status


def host_line(host: events.HostResult, status: str) -> str:
    """One host's result on one line: its status (the report's), what stopped it, or what its modules
    found."""
    if host.failed or host.unreachable:
        detail = host.failure_message()
    else:
        detail = tally({"changes": host.changes, "checks": host.checks})
    return f"{host.name:<16} {status:<11} {detail}".rstrip()


class Display:
    """The progress of gpufleet's runs (runner.run_playbook feeds it every event), and gpufleet's own
    lines (a batch starting). ``verbose`` is --verbose; a terminal is asked of the stream each run."""

    def __init__(
        self,
        stream: TextIO | None = None,
        verbose: bool = False,
        judges: Judges | None = None,
        total: int | None = None,
    ) -> None:
        self._stream = stream
        self.verbose = verbose
        # the commands' judges (commands.registry.console()): without them, checks.host_status
        self.judges = judges
        # how many hosts the next run reaches (the CLI's preflight counts them); later runs of the same
        # command (drift --fix's batches) count the hosts they hear of
        self.total = total
        self._reset("")

    @property
    def stream(self) -> TextIO:
        return self._stream if self._stream is not None else sys.stderr

    def _reset(self, playbook: str) -> None:
        self.playbook = playbook
        self.read_only = False
        self.live = False
        self.started = time.monotonic()
        self.plays = 0
        self.play = ""
        self.task = ""
        self.task_uuid = ""
        self.through: set[str] = set()
        self.printed: set[str] = set()
        self._drawn = 0.0
        self._shown = ""
        self._hosts: dict[str, events.HostResult] = {}
        self._status_of: StatusOf = generic_status(False)
        # each host's status and how many task results it was judged on (judged again only after more)
        self._judged: dict[str, tuple[int, str]] = {}

    def terminal(self) -> bool:
        isatty = getattr(self.stream, "isatty", None)
        return bool(isatty and isatty())

    def __call__(self, line: str) -> None:
        """A line of gpufleet's own (a batch starting, an instance being stopped)."""
        self._above(line)

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()

    def _above(self, line: str) -> None:
        """A line printed above the live line (which is drawn again under it); what it quotes (a node's
        message, a host name) with its control characters written out, as every line here."""
        if self._shown:
            self._write(_CLEAR)
        self._write(printable(line) + "\n")
        if self._shown:
            self._draw(self._hosts, force=True)

    def run_started(self, playbook: str, read_only: bool = False) -> None:
        """A run begins; ``read_only``: it changes nothing (drift, watch, check mode), so what it would
        change is counted as drifted."""
        self._reset(playbook)
        self.read_only = read_only
        judges = self.judges
        self._status_of = judges.status_of(playbook, read_only) if judges else generic_status(read_only)
        self.live = self.terminal() and not self.verbose

    def event(
        self, event: dict[str, Any], entry: dict[str, Any] | None, hosts: dict[str, events.HostResult]
    ) -> None:
        """One ansible-runner event, with the task entry the Collector made of it (None if not a result)."""
        kind = event.get("event", "")
        data = event.get("event_data") or {}
        self._hosts = hosts
        if kind == "playbook_on_play_start":
            self.plays += 1
            self.play = str(data.get("play") or data.get("name") or "")
        elif kind == "playbook_on_task_start":
            self.task = events.task_name(data)
            self.task_uuid = str(data.get("task_uuid") or "")
            self.through = set()
        if entry is None:
            self._draw(hosts)
            return
        name = str(data.get("host"))
        if data.get("task_uuid") == self.task_uuid:
            self.through.add(name)
        if self.verbose:
            self._task_line(name, entry, data)
        elif (
            entry["outcome"] in ("failed", "unreachable")
            and not entry.get("ignored")
            and name not in self.printed
        ):
            # a host that fails is done: its line now, once (a gate's rescue still runs, its report says all)
            self.printed.add(name)
            self._above(self._line(hosts[name]))
        self._draw(hosts)

    def _task_line(self, name: str, entry: dict[str, Any], data: dict[str, Any]) -> None:
        if entry["outcome"] == "skipped":
            return
        res = data.get("res") or {}
        label = entry["outcome"]
        # a read-only comparison (a read-only run, a leaf's read) that found settings differ changed nothing
        reading = self.read_only or str(entry.get("play", "")).startswith(catalog.LEAF_READ_PLAY)
        if label == "ok" and entry["changed"] and not reading:
            label = "changed"
        elif label == "ok" and (res.get("changes") or entry["changed"]):
            label = "drifted"
        message = entry["msg"] if label in ("failed", "unreachable") else tally(res)
        self._above(f"{name:<16} {label:<11} {data.get('task', '')}" + (f": {message}" if message else ""))

    def status(self, hosts: dict[str, events.HostResult]) -> str:
        """The live line: play, hosts through its current task, changed/failed/unreachable of the total."""
        counts = self.counts(hosts)
        del counts["ok"]
        total = self.total if self.total is not None else len(hosts)
        parts = [
            f"{self.playbook}: play {self.plays} {self.play!r}",
            f"{len(self.through)}/{total} hosts through {self.task!r}" if self.task else f"{total} hosts",
            ", ".join(f"{v} {k}" for k, v in counts.items()),
            _clock(time.monotonic() - self.started),
        ]
        return " | ".join(parts)

    def counts(self, hosts: dict[str, events.HostResult]) -> dict[str, int]:
        """How many hosts have each status so far: ok, changed (drifted in a read-only run), failed and
        unreachable always, then any other status a host has (blocked, drifted, interrupted)."""
        changed = "drifted" if self.read_only else "changed"
        counts = dict.fromkeys(("ok", changed, "failed", "unreachable"), 0)
        found = [self.host_status(host) for host in hosts.values()]
        for status in checks.STATUSES:
            if status not in counts and status in found:
                counts[status] = 0
        for status in found:
            counts[status] += 1
        return counts

    def host_status(self, host: events.HostResult) -> str:
        """The host's status as its command's report will give it (judges)."""
        judged = self._judged.get(host.name)
        if judged is None or judged[0] != len(host.tasks):
            judged = (len(host.tasks), self._status_of(host))
            self._judged[host.name] = judged
        return judged[1]

    def _line(self, host: events.HostResult) -> str:
        return host_line(host, self.host_status(host))

    def _draw(self, hosts: dict[str, events.HostResult], force: bool = False) -> None:
        if not self.live:
            return
        now = time.monotonic()
        if not force and now - self._drawn < _REDRAW_S:
            return
        self._drawn = now
        width = max(20, shutil.get_terminal_size((120, 20)).columns - 1)
        text = printable(self.status(hosts))
        self._shown = _CLEAR + (text if len(text) <= width else text[: width - 1] + "…")
        self._write(self._shown)

    def run_finished(self, collector: events.Collector) -> None:
        """The run's end: without a terminal each host's result once; on one, the live line's last word."""
        hosts = collector.hosts
        run_judge = self.judges.across_hosts.get(self.playbook) if self.judges else None
        if run_judge is not None:
            # what the report judges across the hosts (drift: the odd node out), in their last word too
            run_judge(hosts)
            self._judged.clear()
        if self.live:
            self._write(_CLEAR)
            self._shown = ""
            counts = ", ".join(f"{v} {k}" for k, v in self.counts(hosts).items())
            elapsed = _clock(time.monotonic() - self.started)
            self._write(printable(f"{self.playbook}: {len(hosts)} hosts in {elapsed}: {counts}") + "\n")
        elif not self.verbose:
            for name in sorted(hosts):
                if name not in self.printed:
                    self.printed.add(name)
                    self._write(printable(self._line(hosts[name])) + "\n")
        self.live = False
        self.total = None
