"""The fleet report (contract): its types and report.json read back. The files written from it
(report.json, report.md, gpufleet.prom, report.html) are report_files.py's."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpufleet import fact_shapes
from gpufleet.checks import STATUSES, is_good

# 2: a gate's hosts carry the burn-in's samples (facts.gpufleet_burn_in). Every version this gpufleet
# wrote is read back: the renderers take what a report has.
SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


class ReportError(Exception):
    """A report.json that cannot be read back: missing, unreadable, or not this contract."""


def now() -> str:
    return datetime.now(UTC).strftime(TIME_FORMAT)


@dataclass
class HostReport:
    status: str = "ok"
    checks: list[dict[str, Any]] = field(default_factory=list)
    changes: list[dict[str, Any]] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    message: str = ""
    # The host was refused for its inputs (a role input out of range, for this node or any): nothing
    # was changed on it, and the command exits 2 (configuration), not 1.
    configuration_error: bool = False
    # A watch that acts (issue 39, gpufleet.guardian): what it decided for this node and each step it
    # took, with its time (docs/guardian.md); empty for every other run.
    guardian: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "status": self.status,
            "checks": self.checks,
            "changes": self.changes,
            "facts": self.facts,
        }
        if self.message:
            data["message"] = self.message
        if self.configuration_error:
            data["configuration_error"] = True
        if self.guardian:
            data["guardian"] = self.guardian
        return data


@dataclass
class Report:
    command: str
    started: str
    hosts: dict[str, HostReport] = field(default_factory=dict)
    finished: str = ""
    # A signal came during the run: what was asked and what was done about it (interrupt.py); a run
    # that finished all its work after one says so too, so no signal is ever absorbed silently.
    interrupted: str = ""
    # A watch that acts: the circuit breaker's state, the leaves that explain failures, check mode.
    guardian: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, int]:
        counts = dict.fromkeys(STATUSES, 0)
        for host in self.hosts.values():
            counts[host.status] += 1
        counts["hosts"] = len(self.hosts)
        return counts

    def all_ok(self) -> bool:
        return all(is_good(h.status) for h in self.hosts.values())

    def configuration_error(self) -> bool:
        """Whether a host was refused for its inputs (the command's exit status is then 2)."""
        return any(h.configuration_error for h in self.hosts.values())

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "gpufleet_report": SCHEMA_VERSION,
            "command": self.command,
            "started": self.started,
            "finished": self.finished,
        }
        if self.interrupted:
            data["interrupted"] = self.interrupted
        if self.guardian:
            data["guardian"] = self.guardian
        data["hosts"] = {name: self.hosts[name].as_dict() for name in sorted(self.hosts)}
        data["summary"] = self.summary()
        return data


def finished_timestamp(report: Report) -> float:
    """The run's own end, so a report rendered again later still says when its run finished."""
    try:
        return datetime.strptime(report.finished, TIME_FORMAT).replace(tzinfo=UTC).timestamp()
    except ValueError:
        return datetime.now(UTC).timestamp()


def _require(ok: bool, where: str, what: str) -> None:
    if not ok:
        raise ReportError(f"{where}: {what}")


def _host_from_dict(data: Any, where: str) -> HostReport:
    """The host entry, checked as far as the renderers read it."""
    _require(isinstance(data, dict), where, "not an object")
    status = data.get("status")
    _require(status in STATUSES, f"{where}.status", f"{status!r} is not one of {', '.join(STATUSES)}")
    _require(
        isinstance(data.get("configuration_error", False), bool),
        f"{where}.configuration_error",
        "not a boolean",
    )
    for key, kind in (
        ("checks", list),
        ("changes", list),
        ("facts", dict),
        ("message", str),
        ("guardian", dict),
    ):
        _require(isinstance(data.get(key, kind()), kind), f"{where}.{key}", f"not a {kind.__name__}")
    fields = {
        "checks": ("name", "ok", "value", "limit", "unit", "message"),
        "changes": ("setting", "from", "to"),
    }
    for key, needed in fields.items():
        for i, entry in enumerate(data.get(key, [])):
            missing = [k for k in needed if not isinstance(entry, dict) or k not in entry]
            _require(not missing, f"{where}.{key}[{i}]", f"missing {', '.join(missing)}")
            if key == "checks":
                typed = isinstance(entry["name"], str) and isinstance(entry["ok"], bool)
                _require(typed, f"{where}.{key}[{i}]", "name must be a string and ok a boolean")
    facts = data.get("facts", {})
    gpus = facts.get("gpufleet_gpus")
    if gpus is not None:
        _require(isinstance(gpus, list), f"{where}.facts.gpufleet_gpus", "not a list")
        for i, gpu in enumerate(gpus):
            ok = isinstance(gpu, dict) and isinstance(gpu.get("power") or {}, dict)
            ok = ok and ((gpu.get("power") or {}).get("enforced_limit_w") is None or "uuid" in gpu)
            _require(ok, f"{where}.facts.gpufleet_gpus[{i}]", "not a GPU (power and uuid)")
    # every fact the renderers read, of the shape they read (fact_shapes: the events' check too)
    wrong = fact_shapes.facts_problem(facts, f"{where}.facts")
    if wrong:
        raise ReportError(wrong)
    return HostReport(
        status=status,
        checks=list(data.get("checks", [])),
        changes=list(data.get("changes", [])),
        facts=dict(facts),
        message=data.get("message", ""),
        configuration_error=data.get("configuration_error", False),
        guardian=dict(data.get("guardian", {})),
    )


def from_dict(data: Any, where: str = "report") -> Report:
    """A Report from report.json's content; ReportError names the first thing that does not fit."""
    _require(isinstance(data, dict), where, "not a JSON object")
    version = data.get("gpufleet_report")
    _require(
        type(version) is int and version in READABLE_VERSIONS,
        where,
        f"not a gpufleet report (gpufleet_report is {version!r}, this gpufleet reads "
        f"{', '.join(map(str, READABLE_VERSIONS))})",
    )
    for key in ("command", "started", "finished"):
        _require(isinstance(data.get(key), str), f"{where}: {key}", "missing or not a string")
    _require(isinstance(data.get("interrupted", ""), str), f"{where}: interrupted", "not a string")
    _require(isinstance(data.get("guardian", {}), dict), f"{where}: guardian", "not an object")
    hosts = data.get("hosts")
    _require(isinstance(hosts, dict), f"{where}: hosts", "missing or not an object")
    report = Report(
        command=data["command"],
        started=data["started"],
        finished=data["finished"],
        interrupted=data.get("interrupted", ""),
        guardian=dict(data.get("guardian", {})),
    )
    for name, host in hosts.items():
        report.hosts[name] = _host_from_dict(host, f"{where}: hosts.{name}")
    return report


def load(path: Path) -> Report:
    """Reads a report.json back; every error names the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ReportError(
            f"{path}: no report there (a gpufleet command writes one with --report-dir)"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ReportError(f"{path}: cannot be read: {exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReportError(f"{path}: not JSON: {exc}") from None
    return from_dict(data, str(path))
