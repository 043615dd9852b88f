"""`gpufleet report --from-events DIR [DIR ...]`: the report of a run made elsewhere, from its events.

Each DIR is an ansible-runner artifact directory (``job_events/*.json``, what ``ansible-runner process``
writes for a run streamed from an execution node) or the same events as AWX keeps them (a job's
``/api/v2/jobs/<id>/job_events/`` pages saved into ``job_events/``). Several directories are the slices
of one job (AWX job slicing, or one run per execution node): their hosts are merged into one report.
Every host is judged by the same function as a local run of the command (its Command's judges, in
commands.registry: the caller gives them), so the report is the one ``gpufleet <command>`` would have
written.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpufleet import event_shapes, events
from gpufleet import report as report_mod
from gpufleet.commands.base import Command, HostJudge, host_judge, started_by
from gpufleet.report import TIME_FORMAT, HostReport, Report

# A check-mode run of the playbooks that change nodes says so in its stats (tasks/record_mode.yml).
CHECK_MODE_STAT = "gpufleet_check_mode"


# The play every slice runs on the leaf switches (read-only): each slice reads the leaves its nodes are
# cabled to, so a leaf is in every slice's events; it is reported once when the slices read it alike.
SWITCH_READ_PLAY = "Read each leaf switch once"


class EventsError(ValueError):
    """Directories that are not one job's events, or slices that do not fit together."""


@dataclass
class Slice:
    """One artifact directory's run: its playbook, its hosts, and when its events were made."""

    where: Path
    playbook: str
    collector: events.Collector
    started: str
    finished: str


def _event_files(directory: Path) -> list[Path]:
    """job_events/*.json of an artifact directory, or of the one run under a private data directory."""
    if not directory.is_dir():
        raise EventsError(f"{directory}: not a directory")
    found = directory / "job_events"
    if not found.is_dir():
        runs = sorted(p for p in (directory / "artifacts").glob("*/job_events") if p.is_dir())
        if len(runs) > 1:
            raise EventsError(
                f"{directory}: holds {len(runs)} runs ({', '.join(p.parent.name for p in runs)}): "
                "give one run's artifact directory (artifacts/<ident>)"
            )
        if not runs:
            raise EventsError(
                f"{directory}: not ansible-runner artifacts (no job_events/ in it or in artifacts/<ident>/)"
            )
        found = runs[0]
    files = sorted(found.glob("*.json"))
    if not files:
        raise EventsError(f"{found}: no events (*.json) in it")
    return files


def _events_in(path: Path) -> list[dict[str, Any]]:
    """One file's events: ansible-runner writes one event per file; an AWX API page holds ``results``."""
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise EventsError(f"{path}: not an event (JSON): {exc}") from None
    except RecursionError:
        raise EventsError(f"{path}: not an event: nested too deeply to be read") from None
    page = isinstance(data, dict) and "results" in data
    found = data.get("results") if page else data
    found = found if isinstance(found, list) else [found]
    for i, event in enumerate(found):
        wrong = event_shapes.problem(event)
        if wrong:
            raise EventsError(f"{path}: {f'results[{i}]: ' if page else ''}{wrong}")
    if event_shapes.SURROGATE_ESCAPE.search(text):
        found = [event_shapes.escaped(event) for event in found]
    return found


def _when(event: dict[str, Any]) -> str:
    """The event's time as the report writes times (ansible-runner's ``created`` is UTC)."""
    try:
        moment = datetime.fromisoformat(str(event.get("created", "")).replace("Z", "+00:00"))
    except ValueError:
        return ""
    return (moment.astimezone(UTC) if moment.tzinfo else moment).strftime(TIME_FORMAT)


def read_slice(directory: Path) -> Slice:
    """One run's events, in their order; EventsError names the directory when they are not a whole run."""
    found = [event for path in _event_files(directory) for event in _events_in(path)]
    found.sort(key=lambda e: int(e.get("counter") or 0))
    collector = events.Collector()
    playbooks: set[str] = set()
    for event in found:
        collector.add(event)
        playbook = (event.get("event_data") or {}).get("playbook")
        if playbook:
            playbooks.add(Path(str(playbook)).name)
    if not playbooks:
        raise EventsError(f"{directory}: its events name no playbook")
    if len(playbooks) > 1:
        raise EventsError(f"{directory}: events of several playbooks ({', '.join(sorted(playbooks))})")
    if not collector.finished():
        raise EventsError(
            f"{directory}: the run did not end (no playbook_on_stats event): its report would be partial"
        )
    times = [t for t in map(_when, found) if t]
    return Slice(directory, playbooks.pop(), collector, min(times, default=""), max(times, default=""))


def _shared_reading(result: events.HostResult) -> bool:
    """Whether all a host did in a slice is the read of a leaf switch (every slice does it)."""
    return bool(result.tasks) and all(
        str(t.get("play", "")).startswith(SWITCH_READ_PLAY) for t in result.tasks
    )


def merge(slices: list[Slice], commands: Mapping[str, Command]) -> Report:
    """One report of the slices' hosts, judged by the judges of ``commands`` (commands.registry.COMMANDS);
    EventsError names a host reported by two slices."""
    playbooks = sorted({s.playbook for s in slices})
    if len(playbooks) > 1:
        raise EventsError(
            "the directories are runs of different playbooks ("
            + ", ".join(f"{s.where}: {s.playbook}" for s in slices)
            + "): give the slices of one job"
        )
    started = started_by(commands, playbooks[0])
    if started is None or started.judge is None:
        reported = sorted({c.playbook for c in commands.values() if c.playbook and c.judge})
        raise EventsError(
            f"{slices[0].where}: {playbooks[0]} has no gpufleet report "
            f"(reports are made for {', '.join(reported)})"
        )
    checked = {
        bool(((s.collector.stats or {}).get("artifact_data") or {}).get(CHECK_MODE_STAT)) for s in slices
    }
    if len(checked) > 1:
        raise EventsError("some slices ran in check mode and some did not: give the slices of one job")
    check_mode = checked == {True} and started.check_judge is not None
    judge = host_judge(commands, playbooks[0], check_mode) or started.judge
    report = Report(
        command=f"{started.report_name} {started.variant}" if check_mode else started.report_name,
        started=min((s.started for s in slices if s.started), default=""),
        finished=max((s.finished for s in slices), default=""),
    )
    run_judge = started.across_hosts
    if run_judge is not None:
        try:
            run_judge({name: result for piece in slices for name, result in piece.collector.hosts.items()})
        except ValueError as exc:
            raise EventsError(
                f"{', '.join(str(s.where) for s in slices)}: results of a shape gpufleet cannot judge: {exc}"
            ) from None
    where: dict[str, Path] = {}
    for piece in slices:
        for name in sorted(piece.collector.hosts):
            result = piece.collector.hosts[name]
            host = _judged(judge, result, piece.where)
            if name in where:
                both = f"({where[name]} and {piece.where})"
                if not _shared_reading(result):
                    raise EventsError(
                        f"host {name} is reported by two slices {both}: "
                        "give each slice's directory once, and slices of one job (no host in two)"
                    )
                if host.as_dict() != report.hosts[name].as_dict():
                    raise EventsError(
                        f"leaf switch {name} was read differently by two slices {both}: it changed "
                        "between them; run the slices again"
                    )
                continue
            where[name] = piece.where
            report.hosts[name] = host
    try:
        # what the report's renderers read, checked as report.json is when read back
        report_mod.from_dict(report.as_dict())
    except report_mod.ReportError as exc:
        raise EventsError(
            f"{', '.join(str(s.where) for s in slices)}: results gpufleet cannot report: {exc}"
        ) from None
    return report


def _judged(judge: HostJudge, result: events.HostResult, where: Path) -> HostReport:
    """The host judged; results whose shape the judge cannot read (a hand-made fact, say) are
    refused naming the directory and the host, not a traceback."""
    try:
        return judge(result)
    except (TypeError, ValueError, KeyError, AttributeError, IndexError) as exc:
        raise EventsError(
            f"{where}: host {result.name}: results of a shape gpufleet cannot judge "
            f"({type(exc).__name__}: {exc})"
        ) from None


def report_of(directories: list[Path], commands: Mapping[str, Command]) -> Report:
    """The report of the runs in ``directories`` (one job's slices), each host judged by its command's
    judge in ``commands`` (commands.registry.COMMANDS)."""
    return merge([read_slice(d) for d in directories], commands)
