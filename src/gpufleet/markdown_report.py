"""report.md: the report for people, a table per node that failed or changed, and drift's tables."""

from __future__ import annotations

import html
import json
from typing import Any

from gpufleet.checks import STATUSES
from gpufleet.printable import printable
from gpufleet.report import Report


def _md_text(value: Any) -> str:
    """A value as report.md text on one line: line breaks (any white space) as spaces (one would end a
    table row or a heading), the other control characters written out (a terminal showing the file
    would act on them), HTML escaped (a renderer would run a host name's <script>)."""
    text = "" if value is None else (json.dumps(value) if isinstance(value, list | dict) else str(value))
    return html.escape(printable(" ".join(text.split())), quote=False)


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


def guardian_run_lines(report: Report, leaves: bool = True) -> list[str]:
    """A watch that acts (docs/guardian.md): a --check run's note, the circuit breaker, the leaves that
    explain failures (unless report.html's table shows them); plain text, one line each (the console
    prints them too)."""
    guardian = report.guardian
    if not guardian:
        return []
    lines = []
    if guardian.get("check"):
        lines.append("Check mode (--check): nothing was changed; each decision is what the run would do.")
    breaker = guardian.get("breaker") or {}
    if breaker:
        state = f"open since {breaker.get('opened') or '?'}" if breaker.get("open") else "closed"
        lines.append(
            f"Circuit breaker {state}: {breaker.get('used')} of {breaker.get('limit')} node(s) taken out "
            f"in {breaker.get('window_min')} min."
        )
    for leaf, why in sorted((guardian.get("leaves") or {}).items()) if leaves else []:
        lines.append(f"Leaf {leaf} explains its nodes' failures: {why}")
    return lines


def guardian_host_line(guardian: dict[str, Any]) -> str:
    """A node's guardian decision on one line: the decision, its classes, remediation, leaf and why."""
    if not guardian:
        return ""
    line = str(guardian.get("decision") or "?").replace("_", " ")
    classes = guardian.get("classes") or {}
    if classes:
        line += f" ({', '.join(classes)})"
    if guardian.get("remediation"):
        line += f", remediation {guardian['remediation']}"
    if guardian.get("leaf"):
        line += f", leaf {guardian['leaf']}"
    if guardian.get("why"):
        line += f": {guardian['why']}"
    return line


def _guardian_host(guardian: dict[str, Any]) -> list[str]:
    """The node's decision, its drain reason and each step with its times and outcome."""
    lines = [f"**Guardian:** {_md_text(guardian_host_line(guardian))}", ""]
    if guardian.get("reason"):
        lines += [f"Drain reason: {_md_text(guardian['reason'])}", ""]
    steps = guardian.get("steps") or []
    if steps:
        lines += ["| step | started | finished | outcome | message |", "|---|---|---|---|---|"]
        for st in steps:
            cells = [st.get(k) for k in ("step", "started", "finished", "outcome", "message")]
            lines.append("| " + " | ".join(_md_cell(c) for c in cells) + " |")
        lines.append("")
    return lines


def guardian_console(report: Report) -> list[str]:
    """What the console prints after a watch that acts: the run's lines, then one per node with a
    decision and its steps' outcomes (the reports have the times)."""
    lines = [f"guardian: {line}" for line in guardian_run_lines(report)]
    for name in sorted(report.hosts):
        guardian = report.hosts[name].guardian
        if not guardian:
            continue
        line = f"guardian: {name}: {guardian_host_line(guardian)}"
        steps = [s for s in guardian.get("steps") or [] if isinstance(s, dict)]
        if steps:
            line += "; steps: " + ", ".join(f"{s.get('step')} {s.get('outcome')}" for s in steps)
        lines.append(line)
    return lines


def render(report: Report) -> str:
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
    for line in guardian_run_lines(report):
        lines += [f"**Guardian:** {_md_text(line)}", ""]
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
        if not (failed or host.changes or host.message or host.guardian):
            continue
        lines += ["", f"## {_md_text(name)}: {host.status}", ""]
        if host.message:
            lines += [_md_text(host.message), ""]
        if host.guardian:
            lines += _guardian_host(host.guardian)
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
