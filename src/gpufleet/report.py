"""The fleet report (contract): report.json for machines, report.md for people, and a
node_exporter textfile (gpufleet.prom)."""

from __future__ import annotations

import html
import json
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpufleet import interrupt
from gpufleet.checks import STATUSES, is_good

# 2: a gate's hosts carry the burn-in's samples (facts.gpufleet_burn_in). Every version this gpufleet
# wrote is read back: the renderers take what a report has.
SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)
FORMATS = ("md", "json", "prom", "html")
FILES = {"json": "report.json", "md": "report.md", "prom": "gpufleet.prom", "html": "report.html"}
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
        data["hosts"] = {name: self.hosts[name].as_dict() for name in sorted(self.hosts)}
        data["summary"] = self.summary()
        return data


def _md_text(value: Any) -> str:
    """A value as report.md text on one line: HTML escaped (a renderer would run a host name's
    <script>), line breaks as spaces (one would end a table row or a heading)."""
    text = "" if value is None else (json.dumps(value) if isinstance(value, list | dict) else str(value))
    return " ".join(html.escape(text, quote=False).split())


def _md_cell(value: Any) -> str:
    """A value in a report.md table cell: _md_text, a '|' kept from ending the cell."""
    return _md_text(value).replace("|", "\\|")


def _drift_tables(report: Report) -> list[str]:
    """Drift: how many nodes each setting drifted on, and a node x setting table (from -> to)."""
    counts: dict[str, int] = {}
    for host in report.hosts.values():
        for setting in dict.fromkeys(ch["setting"] for ch in host.changes):
            counts[setting] = counts.get(setting, 0) + 1
    if not counts:
        return ["", "No setting drifted."]
    settings = sorted(counts, key=lambda s: (-counts[s], s))
    lines = ["", "## Drifted settings", "", "| setting | nodes |", "|---|---|"]
    lines += [f"| {_md_cell(s)} | {counts[s]} node{'' if counts[s] == 1 else 's'} |" for s in settings]
    lines += ["", "## Node x setting", ""]
    lines.append("| node | " + " | ".join(_md_cell(s) for s in settings) + " |")
    lines.append("|---|" + "---|" * len(settings))
    for name in sorted(report.hosts):
        by_setting = {ch["setting"]: ch for ch in report.hosts[name].changes}
        if not by_setting:
            continue
        cells = [
            f"{_md_cell(by_setting[s]['from'])} → {_md_cell(by_setting[s]['to'])}" if s in by_setting else ""
            for s in settings
        ]
        lines.append(f"| {_md_cell(name)} | " + " | ".join(cells) + " |")
    return lines


def render_markdown(report: Report) -> str:
    summary = report.summary()
    lines = [
        f"# gpufleet {_md_text(report.command)}",
        "",
        f"Started {_md_text(report.started)}, finished {_md_text(report.finished)}. "
        + ", ".join(f"{summary[s]} {s}" for s in STATUSES if summary[s])
        + f" of {summary['hosts']} hosts.",
        "",
    ]
    if report.interrupted:
        lines += [f"**Interrupted:** {_md_text(report.interrupted)}", ""]
    lines += [
        "| host | status | GPUs | failed checks | changes |",
        "|---|---|---|---|---|",
    ]
    for name in sorted(report.hosts):
        host = report.hosts[name]
        failed = [c for c in host.checks if not c["ok"]]
        gpus = host.facts.get("gpufleet_gpus")
        count = "-" if gpus is None else str(len(gpus))
        checked = f"{len(failed)} of {len(host.checks)}"
        lines.append(f"| {_md_cell(name)} | {host.status} | {count} | {checked} | {len(host.changes)} |")
    if report.command.startswith("drift"):
        lines += _drift_tables(report)
    for name in sorted(report.hosts):
        host = report.hosts[name]
        failed = [c for c in host.checks if not c["ok"]]
        if not (failed or host.changes or host.message):
            continue
        lines += ["", f"## {_md_text(name)}: {host.status}", ""]
        if host.message:
            lines += [_md_text(host.message), ""]
        if failed:
            lines += ["| check | value | limit | message |", "|---|---|---|---|"]
            for c in failed:
                value = f"{_md_cell(c['value'])} {c['unit']}".strip()
                limit = f"{_md_cell(c['limit'])} {c['unit']}".strip()
                lines.append(f"| {_md_cell(c['name'])} | {value} | {limit} | {_md_cell(c['message'])} |")
        if host.changes:
            lines += ["", "| setting | from | to |", "|---|---|---|"]
            for ch in host.changes:
                lines.append(f"| {_md_cell(ch['setting'])} | {_md_cell(ch['from'])} | {_md_cell(ch['to'])} |")
    return "\n".join(lines) + "\n"


def render_prometheus(report: Report) -> str:
    """node_exporter textfile collector format (prom.py)."""
    # Imported here: prom.py imports Report from this module.
    from gpufleet import prom

    return prom.render(report)


def finished_timestamp(report: Report) -> float:
    """The run's own end, so a report rendered again later still says when its run finished."""
    try:
        return datetime.strptime(report.finished, TIME_FORMAT).replace(tzinfo=UTC).timestamp()
    except ValueError:
        return datetime.now(UTC).timestamp()


def render(report: Report, kind: str) -> str:
    """One of FORMATS: report.json's text, report.md's, gpufleet.prom's or report.html's."""
    if kind == "json":
        return json.dumps(report.as_dict(), indent=2, sort_keys=False) + "\n"
    if kind == "md":
        return render_markdown(report)
    if kind == "prom":
        return render_prometheus(report)
    if kind == "html":
        # imported here: the page's templates and charts are needed only when a page is written
        from gpufleet import html_report

        return html_report.render(report)
    raise ValueError(f"unknown report format {kind!r}, expected one of {', '.join(FORMATS)}")


def write(report: Report, directory: Path, kinds: tuple[str, ...] = FORMATS) -> dict[str, Path]:
    """Writes the files atomically (a textfile collector must never read half a file). A signal this
    run got is recorded first (every command's report is written here)."""
    if not report.interrupted:
        report.interrupted = interrupt.STATE.described()
    directory.mkdir(parents=True, exist_ok=True)
    outputs = {kind: (directory / FILES[kind], render(report, kind)) for kind in kinds}
    for path, text in outputs.values():
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    return {kind: path for kind, (path, _) in outputs.items()}


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
    for key, kind in (("checks", list), ("changes", list), ("facts", dict), ("message", str)):
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
    return HostReport(
        status=status,
        checks=list(data.get("checks", [])),
        changes=list(data.get("changes", [])),
        facts=dict(facts),
        message=data.get("message", ""),
        configuration_error=data.get("configuration_error", False),
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
    hosts = data.get("hosts")
    _require(isinstance(hosts, dict), f"{where}: hosts", "missing or not an object")
    report = Report(
        command=data["command"],
        started=data["started"],
        finished=data["finished"],
        interrupted=data.get("interrupted", ""),
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
