"""report.html: one self-contained page people would rather look at than report.md.

``render(report)`` returns the whole page as one string: styles and the small script inline, the
burn-in charts inline SVG (html_charts.py says why matplotlib), nothing fetched when it is opened
(a file:// URL, any static server, a mail attachment), readable when printed (the print styles open
every section and drop the dark fills). The layout is Jinja2 (templates/, autoescaped); every
value of the report reaches the page escaped.

What it shows, from the report alone (report.json of any version this gpufleet reads):
- the run: command, times, hosts by status, the exit verdict (cli's exit status in words);
- a node x setting heat map wherever hosts have changes (drift, check, provision): one cell
  (``data-cell``) per node and drifted setting, coloured by the node's status, from -> to in its
  title, per-setting node counts, sortable and filtered by node name;
- a card per node that needs attention (and per node with a burn-in or coolant reading in a small
  fleet): the verdict and the step that stopped it (the host's message), the failed readings with
  value and limit, the burn-in's traces (``facts.gpufleet_burn_in``) and the coolant loops
  (``facts.gpufleet_coolant``);
- per host a collapsed details section: every check, every change, the message and hints.

Scale: above LARGE_FLEET hosts the page aggregates: only nodes that need attention get a card and
at most MAX_CHARTS of them a chart (the others a summary line of their burn-in), a good host's
passing checks are counted per condition rather than listed one by one (report.json has each).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import jinja2
from markupsafe import Markup

from gpufleet import html_charts, markdown_report
from gpufleet.checks import STATUSES, is_good
from gpufleet.printable import printable
from gpufleet.report import HostReport, Report

# More hosts than this and the page aggregates (see the module docstring).
LARGE_FLEET = 50
# At most this many burn-in charts in one page, the nodes that need attention first.
MAX_CHARTS = 50
# A heat-map cell shows its from -> to as text up to this length (else a mark; the title has it).
CELL_TEXT = 16

VERDICTS = {
    "config": (
        "refused",
        "exit 2: a host was refused before anything changed on it (its inputs, or another run holds it)",
    ),
    "good": ("all good", "exit 0: every host is ok or changed into the wanted state"),
    "attention": ("needs attention", "exit 1: a host drifted, failed, was blocked or could not be reached"),
}
# coolant.<reading>[<connector>]: the reading's key in the connector, and whether the limit is a floor
_COOLANT_READINGS = {
    "flow_lpm": ("flow_lpm", "≥"),
    "supply_temp_c": ("supply_c", "≤"),
    "return_temp_c": ("return_c", "≤"),
    "delta_temp_c": ("delta_c", "≤"),
}


def fmt(value: Any, unit: str = "") -> str:
    """A reading as text: None is a dash, lists and objects JSON, floats without trailing zeros."""
    if value is None:
        text = "–"
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, float):
        text = f"{value:g}"
    elif isinstance(value, list | dict):
        text = json.dumps(value, sort_keys=True)
    else:
        text = str(value)
    return f"{text} {unit}".strip() if unit and value is not None else text


def _base_name(name: str) -> str:
    """``rdma_link.link_state[mlx5_0]`` -> ``rdma_link.link_state`` (the condition, any device)."""
    return name.split("[", 1)[0]


def _device(name: str) -> str:
    match = re.search(r"\[(.*)\]$", name)
    return match.group(1) if match else ""


@dataclass
class CoolantRow:
    key: str
    name: str
    readings: list[dict[str, Any]]  # per reading: text, limit text, ok (None: not judged)
    health: str
    health_ok: bool | None
    leak: str
    leak_ok: bool | None


@dataclass
class HostView:
    name: str
    anchor: str
    host: HostReport
    failed: list[dict[str, Any]]
    passed: list[dict[str, Any]]
    passed_groups: list[tuple[str, int]]
    message_lines: list[str]
    gpus: int | None
    burn_in: dict[str, Any] | None = None
    chart: str | None = None
    coolant: list[CoolantRow] = field(default_factory=list)
    # a watch that acts (host.guardian): the decision on one line, the drain reason, each step
    guardian_decision: str = ""
    guardian_line: str = ""
    guardian_reason: str = ""
    guardian_steps: list[dict[str, str]] = field(default_factory=list)

    @property
    def status(self) -> str:
        return self.host.status

    @property
    def good(self) -> bool:
        return is_good(self.host.status)


@dataclass
class HeatCell:
    text: str
    title: str
    # a family's members on this node (a GPU, a port: its device and from -> to), one click away
    members: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class HeatRow:
    host: HostView
    cells: list[HeatCell | None]


def _anchors(names: list[str]) -> dict[str, str]:
    """An id per host, unique in the page and safe in a URL fragment."""
    anchors: dict[str, str] = {}
    used: set[str] = set()
    for i, name in enumerate(names):
        slug = "host-" + (re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or str(i))
        if slug in used:
            slug = f"{slug}-{i}"
        used.add(slug)
        anchors[name] = slug
    return anchors


def _message_lines(message: str) -> list[str]:
    """The host's message and its hints (joined with '; ' in report.json), one per line."""
    return [part.strip() for part in message.split("; ") if part.strip()]


def _power_limit(host: HostReport) -> float | None:
    """The GPUs' enforced power limit, drawn on the power panel when every GPU has the same one."""
    limits = {
        (gpu.get("power") or {}).get("enforced_limit_w")
        for gpu in host.facts.get("gpufleet_gpus") or []
        if isinstance(gpu, dict)
    }
    if len(limits) == 1:
        (limit,) = limits
        if isinstance(limit, int | float) and not isinstance(limit, bool):
            return float(limit)
    return None


def _coolant_rows(host: HostReport) -> list[CoolantRow]:
    coolant = host.facts.get("gpufleet_coolant")
    if not isinstance(coolant, dict):
        return []
    by_name = {c["name"]: c for c in host.checks}
    connectors = [c for c in coolant.get("connectors") or [] if isinstance(c, dict)]
    seen = {c.get("key") for c in connectors}
    for cdu in coolant.get("cdus") or []:
        if isinstance(cdu, dict):
            connectors += [
                c for c in cdu.get("connectors") or [] if isinstance(c, dict) and c.get("key") not in seen
            ]
    rows = []
    for conn in connectors:
        key = str(conn.get("key", conn.get("id", "")))
        readings = []
        for reading, (fact_key, direction) in _COOLANT_READINGS.items():
            judged = by_name.get(f"coolant.{reading}[{key}]")
            unit = judged["unit"] if judged else ("L/min" if reading == "flow_lpm" else "°C")
            if reading == "delta_temp_c" and not judged:
                unit = "K"
            limit = f"{direction} {fmt(judged['limit'], judged['unit'])}" if judged else ""
            readings.append(
                {
                    "text": fmt(conn.get(fact_key), unit),
                    "limit": limit,
                    "ok": judged["ok"] if judged else None,
                }
            )
        health = by_name.get(f"coolant.health[{key}]")
        leak = by_name.get(f"coolant.leak[{key}]")
        rows.append(
            CoolantRow(
                key=key,
                name=str(conn.get("name", "")),
                readings=readings,
                health=fmt(conn.get("health")),
                health_ok=health["ok"] if health else None,
                leak=fmt(conn.get("leak")),
                leak_ok=leak["ok"] if leak else None,
            )
        )
    return rows


def _host_view(name: str, anchor: str, host: HostReport, large: bool) -> HostView:
    failed = [c for c in host.checks if not c["ok"]]
    passed = [c for c in host.checks if c["ok"]]
    groups: dict[str, int] = {}
    for c in passed:
        groups[_base_name(c["name"])] = groups.get(_base_name(c["name"]), 0) + 1
    gpus = host.facts.get("gpufleet_gpus")
    burn_in = host.facts.get("gpufleet_burn_in")
    return HostView(
        name=name,
        anchor=anchor,
        host=host,
        failed=failed,
        passed=[] if large else passed,
        passed_groups=sorted(groups.items()),
        message_lines=_message_lines(host.message),
        gpus=len(gpus) if isinstance(gpus, list) else None,
        burn_in=html_charts.summary(burn_in) if html_charts.has_samples(burn_in) else None,
        coolant=_coolant_rows(host),
        guardian_decision=str(host.guardian.get("decision") or ""),
        guardian_line=markdown_report.guardian_host_line(host.guardian),
        guardian_reason=str(host.guardian.get("reason") or ""),
        guardian_steps=_guardian_steps(host.guardian),
    )


_STEP_KEYS = ("step", "started", "finished", "outcome", "message")


def _guardian_steps(guardian: dict[str, Any]) -> list[dict[str, str]]:
    """The guardian's steps, each with every key the template shows (a missing one empty)."""
    steps = guardian.get("steps") or []
    return [{k: str(st.get(k) or "") for k in _STEP_KEYS} for st in steps if isinstance(st, dict)]


def _members_kind(devices: list[str]) -> str:
    if all(d.startswith("GPU-") for d in devices):
        return "GPUs"
    if all(d.startswith("mlx5_") or " -> " in d for d in devices):
        return "ports"
    return "items"


def _cell_text(value: str) -> str:
    """A from -> to short enough for a cell, else a mark (the cell's title has it)."""
    return value if len(value) <= CELL_TEXT else "Δ"


def _heat_cell(view: HostView, family: str, changes: list[dict[str, Any]]) -> HeatCell:
    """One node's changes in one setting family: a setting of its own as before; a per-GPU or per-port
    family counted ('16/16 GPUs 1100 → 1400'), each member's from -> to in the cell's list."""
    values = [f"{fmt(ch['from'])} → {fmt(ch['to'])}" for ch in changes]
    devices = [_device(str(ch["setting"])) for ch in changes]
    if devices == [""]:
        return HeatCell(text=_cell_text(values[0]), title=f"{view.name} · {family}\n{values[0]}")
    kind = _members_kind(devices)
    total = view.gpus if kind == "GPUs" and view.gpus and view.gpus >= len(changes) else None
    one = len(changes) == 1 and not total
    counted = f"{len(changes)}/{total} {kind}" if total else f"{len(changes)} {kind[:-1] if one else kind}"
    distinct = list(dict.fromkeys(values))
    if len(distinct) == 1:
        text = f"{counted} {_cell_text(distinct[0])}"
    else:
        text = f"{counted}, {len(distinct)} values"
    members = list(zip(devices, values, strict=True))
    title = f"{view.name} · {family}\n" + "\n".join(f"{device}: {value}" for device, value in members)
    return HeatCell(text=text, title=title, members=members)


def _heat_map(views: list[HostView]) -> tuple[list[tuple[str, int]], list[HeatRow]]:
    """Drifted setting families (``gpu_power.enforced_limit_w`` for every GPU's; most nodes first)
    and one row per node with changes."""
    counts: dict[str, int] = {}
    for view in views:
        for family in dict.fromkeys(_base_name(str(ch["setting"])) for ch in view.host.changes):
            counts[family] = counts.get(family, 0) + 1
    families = sorted(counts, key=lambda s: (-counts[s], s))
    rows = []
    for view in views:
        if not view.host.changes:
            continue
        by_family: dict[str, list[dict[str, Any]]] = {}
        for ch in view.host.changes:
            by_family.setdefault(_base_name(str(ch["setting"])), []).append(ch)
        cells: list[HeatCell | None] = [
            _heat_cell(view, f, by_family[f]) if f in by_family else None for f in families
        ]
        rows.append(HeatRow(view, cells))
    return [(s, counts[s]) for s in families], rows


def _verdict(report: Report) -> str:
    if report.configuration_error():
        return "config"
    return "good" if report.all_ok() else "attention"


def page(report: Report) -> dict[str, Any]:
    """What the template shows, computed once (charts drawn here)."""
    names = sorted(report.hosts)
    large = len(names) > LARGE_FLEET
    anchors = _anchors(names)
    views = [_host_view(n, anchors[n], report.hosts[n], large) for n in names]
    settings, heat_rows = _heat_map(views)
    gate = report.command.startswith("gate")
    # a card where there is something to show beyond the heat map and the host's details
    shown = [
        v
        for v in views
        if (
            v.burn_in is not None
            or bool(v.coolant)
            or bool(v.failed)
            or bool(v.message_lines)
            or bool(v.guardian_line)
        )
        and (not v.good or not large)
    ]
    charted = 0
    for view in sorted(shown, key=lambda v: v.good):
        if view.burn_in is not None and charted < MAX_CHARTS and (not large or not view.good):
            view.chart = html_charts.burn_in_svg(
                report.hosts[view.name].facts["gpufleet_burn_in"],
                key=view.anchor,
                power_limit_w=_power_limit(view.host),
            )
            charted += 1
    summary = report.summary()
    verdict = _verdict(report)
    return {
        "report": report,
        "statuses": [(s, summary[s]) for s in STATUSES],
        "total": summary["hosts"],
        "verdict": verdict,
        "verdict_text": VERDICTS[verdict],
        "large": large,
        "large_fleet": LARGE_FLEET,
        "max_charts": MAX_CHARTS,
        "hosts": views,
        "settings": settings,
        "heat_rows": heat_rows,
        "cards": shown,
        "charted": charted,
        "gate": gate,
        "guardian_lines": markdown_report.guardian_run_lines(report, leaves=False),
        "guardian_leaves": sorted((report.guardian.get("leaves") or {}).items()),
    }


def _finalize(value: Any) -> Any:
    """Every value a template prints: a text's control characters written out before autoescape (HTML
    has no escape for them, and a page printed to a terminal would act on them); markup (the charts)
    as it is."""
    if isinstance(value, str) and not isinstance(value, Markup):
        return printable(value, lines=True)
    return value


@cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        finalize=_finalize,
        loader=jinja2.PackageLoader("gpufleet", "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["fmt"] = fmt
    env.filters["device"] = _device
    return env


def render(report: Report) -> str:
    """report.html's text for a report."""
    data = page(report)
    charts = {v.anchor: Markup(v.chart) for v in data["cards"] if v.chart}
    return _environment().get_template("report.html.j2").render(page=data, charts=charts)
