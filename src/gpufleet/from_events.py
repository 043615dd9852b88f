"""`gpufleet report --from-events DIR [DIR ...]`: the report of a run made elsewhere, from its events.

Each DIR is an ansible-runner artifact directory (``job_events/*.json``, what ``ansible-runner process``
writes for a run streamed from an execution node) or the same events as AWX keeps them (a job's
``/api/v2/jobs/<id>/job_events/`` pages saved into ``job_events/``). Several directories are the slices
of one job (AWX job slicing, or one run per execution node): their hosts are merged into one report.
Every host is judged by the same function as a local run of the command (drift.drift_host, ...), so the
report is the one ``gpufleet <command>`` would have written.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from gpufleet import catalog, commands, drift, event_shapes, events, progress, watch
from gpufleet import report as report_mod
from gpufleet.report import TIME_FORMAT, HostReport, Report

HostJudge = Callable[[events.HostResult], HostReport]

# The playbooks whose events make a report, and how their command judges a host (the local run's own
# functions); the command is the playbook's (catalog.PLAYBOOKS).
JUDGES: dict[str, HostJudge] = {
    "drift.yml": drift.drift_host,
    "facts.yml": commands.facts_host,
    "provision.yml": partial(commands.provision_host, check_mode=False),
    "switch_qos.yml": partial(commands.provision_host, check_mode=False),
    "post_maintenance.yml": commands.gate_host,
    "watch.yml": watch.watch_host,
}
# What a command judges across its hosts, before each host's own judge: every slice's hosts together
# (drift: the odd node out of the nodes' versions, drift.compare_versions); adds checks to the hosts.
RUN_JUDGES: dict[str, Callable[[Mapping[str, events.HostResult]], None]] = {
    "drift.yml": drift.compare_versions,
}
# A check-mode run of the playbooks that change nodes says so in its stats (tasks/record_mode.yml).
CHECK_MODE: dict[str, HostJudge] = {
    "provision.yml": partial(commands.provision_host, check_mode=True),
    "switch_qos.yml": partial(commands.provision_host, check_mode=True),
}
CHECK_MODE_STAT = "gpufleet_check_mode"


def report_status(playbook: str, read_only: bool = False) -> progress.StatusOf:
    """The status a host of this playbook's run gets in its command's report: the command's own host
    judge (JUDGES, the one report --from-events uses; drift --fix's for its batches), so
    the console never says what the report does not."""
    checked = read_only and playbook in CHECK_MODE
    judges = CHECK_MODE if checked else JUDGES
    judge = judges.get(playbook)
    if judge is not None:
        return lambda host: judge(host).status
    if playbook == "drift_fix.yml":
        # a batch's nodes as the fix reports them; the leaves it reads keep drift's verdict of them
        return lambda host: (
            drift.drift_host(host).status if host.only_read_leaf() else drift.fixed_status(host)
        )
    if playbook == "gate_stop.yml":
        # what a stopped gate reached: the report says interrupted (and what this run did about it)
        return lambda host: "interrupted"
    return progress.generic_status(read_only)


# What the console's Display is given (the CLI sets it), so it says of each host what the report will.
REPORT_JUDGES = progress.Judges(status_of=report_status, across_hosts=RUN_JUDGES)


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


def merge(slices: list[Slice]) -> Report:
    """One report of the slices' hosts; EventsError names a host reported by two slices."""
    playbooks = sorted({s.playbook for s in slices})
    if len(playbooks) > 1:
        raise EventsError(
            "the directories are runs of different playbooks ("
            + ", ".join(f"{s.where}: {s.playbook}" for s in slices)
            + "): give the slices of one job"
        )
    if playbooks[0] not in JUDGES:
        raise EventsError(
            f"{slices[0].where}: {playbooks[0]} has no gpufleet report "
            f"(reports are made for {', '.join(sorted(JUDGES))})"
        )
    command, judge = catalog.PLAYBOOKS[playbooks[0]].command, JUDGES[playbooks[0]]
    checked = {
        bool(((s.collector.stats or {}).get("artifact_data") or {}).get(CHECK_MODE_STAT)) for s in slices
    }
    if len(checked) > 1:
        raise EventsError("some slices ran in check mode and some did not: give the slices of one job")
    if checked == {True} and playbooks[0] in CHECK_MODE:
        command, judge = f"{command} --check", CHECK_MODE[playbooks[0]]
    report = Report(
        command=command,
        started=min((s.started for s in slices if s.started), default=""),
        finished=max((s.finished for s in slices), default=""),
    )
    run_judge = RUN_JUDGES.get(playbooks[0])
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


def report_of(directories: list[Path]) -> Report:
    return merge([read_slice(d) for d in directories])
