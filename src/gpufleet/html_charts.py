"""The burn-in charts of report.html: matplotlib, rendered to SVG here, embedded inline in the page.

Why matplotlib's SVG rather than a JavaScript plotting library (Plotly, Vega-Lite):
- maintained and packaged everywhere (PyPI, Debian), no toolchain or browser of its own;
- offline by construction: the chart is finished markup when the page is written, there is no
  script to inline or fetch, so the page opens from a file:// URL with no network;
- no JS payload: Plotly's bundle alone is ~3.5 MB per page, while one node's chart here is tens of
  kB, so a 1,000-node page stays small, and only the nodes that get a chart pay for one;
- printable: SVG is vector, prints as it shows, and needs no script to have run.

matplotlib is imported lazily (only when a chart is drawn) and never through pyplot: a Figure with
the Agg-based SVG canvas, no global state, no display. The SVG is kept small: text stays text
(``svg.fonttype: none``), long traces are decimated (min/max per bucket, so a spike that crossed a
limit still shows), and the clip-path ids are salted per chart so several charts share one page.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Sequence
from typing import Any, TypeGuard

# More samples than this per line are decimated: a panel is ~250 px wide.
MAX_POINTS = 300
# The panels: the trace's key, the title, the unit, the limit's key in the fact's "limits".
PANELS: tuple[tuple[str, str, str, str | None], ...] = (
    ("gpu_c", "GPU temperature", "°C", "max_gpu_temp_c"),
    ("memory_c", "Memory temperature", "°C", "max_memory_temp_c"),
    ("sm_mhz", "SM clock", "MHz", None),
    ("power_w", "Power", "W", None),
)
# matplotlib's tab10, one per GPU; from the 11th GPU on the colours repeat, dotted (the legend tells)
_COLOURS = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)
_LIMIT_COLOUR = "#c62828"
_EVENT_COLOUR = "#d84315"


def _number(value: Any) -> float:
    """A sample's reading as a float; a missing one (None, not a number) is a gap in the line."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return math.nan
    return float(value)


def decimate(
    t: Sequence[float], y: Sequence[float], limit: int = MAX_POINTS
) -> tuple[list[float], list[float]]:
    """At most about ``limit`` points: per bucket the lowest and the highest sample, in time order, so
    the extremes (a limit crossed for one sample) survive. Short traces come back as they are."""
    n = min(len(t), len(y))
    if n <= limit:
        return list(t[:n]), list(y[:n])
    size = math.ceil(n / (limit // 2))
    keep: list[int] = []
    for start in range(0, n, size):
        bucket = [i for i in range(start, min(start + size, n)) if not math.isnan(y[i])]
        if not bucket:
            keep.append(start)  # keeps the gap
            continue
        low = min(bucket, key=lambda i: y[i])
        high = max(bucket, key=lambda i: y[i])
        keep.extend(sorted({low, high}))
    return [t[i] for i in keep], [y[i] for i in keep]


def _traces(fact: dict[str, Any]) -> list[dict[str, Any]]:
    gpus = fact.get("gpus")
    return [g for g in gpus if isinstance(g, dict)] if isinstance(gpus, list) else []


def has_samples(fact: Any) -> TypeGuard[dict[str, Any]]:
    """Whether a ``gpufleet_burn_in`` fact has anything to draw."""
    return isinstance(fact, dict) and any(isinstance(g.get("t"), list) and g["t"] for g in _traces(fact))


def _label(gpu: dict[str, Any]) -> str:
    index = gpu.get("index")
    return f"GPU {index}" if isinstance(index, int) else str(gpu.get("uuid", "GPU"))[:12]


def burn_in_svg(fact: dict[str, Any], *, key: str, power_limit_w: float | None = None) -> str:
    """One node's burn-in as inline SVG markup: four small panels (GPU temperature, memory
    temperature, SM clock, power), one line per GPU, the limits dashed, throttle events marked on
    every panel at the GPU's reading. ``key`` (the host) salts the SVG's ids, unique in the page."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.backends.backend_svg import FigureCanvasSVG
    from matplotlib.figure import Figure

    limits = fact["limits"] if isinstance(fact.get("limits"), dict) else {}
    traces = _traces(fact)
    with matplotlib.rc_context(
        {
            "svg.fonttype": "none",
            "svg.hashsalt": key,
            "font.size": 7,
            "axes.titlesize": 8,
            "axes.linewidth": 0.6,
            "lines.linewidth": 0.9,
            "path.simplify": True,
        }
    ):
        figure = Figure(figsize=(9.6, 2.3), dpi=72)
        FigureCanvasSVG(figure)
        axes = figure.subplots(1, 4)
        for panel, (field, title, unit, limit_key) in zip(axes, PANELS, strict=True):
            panel.set_title(f"{title} ({unit})")
            panel.set_xlabel("s")
            panel.grid(True, linewidth=0.3, alpha=0.5)
            for i, gpu in enumerate(traces):
                t = [_number(v) for v in gpu.get("t") or []]
                y = [_number(v) for v in gpu.get(field) or []]
                if not t or all(math.isnan(v) for v in y):
                    continue
                xs, ys = decimate(t, y)
                colour = _COLOURS[i % len(_COLOURS)]
                panel.plot(
                    xs, ys, color=colour, linestyle="-" if i < len(_COLOURS) else ":", label=_label(gpu)
                )
                events = [e for e in gpu.get("events") or [] if isinstance(e, dict)]
                marks = [(_number(e.get("t")), _value_at(t, y, _number(e.get("t")))) for e in events]
                marks = [(x, v) for x, v in marks if not (math.isnan(x) or math.isnan(v))]
                if marks:
                    panel.plot(
                        [x for x, _ in marks],
                        [v for _, v in marks],
                        linestyle="none",
                        marker="v",
                        markersize=4,
                        color=_EVENT_COLOUR,
                        label="_throttle",
                    )
            limit = limits.get(limit_key) if limit_key else None
            if field == "power_w":
                limit = power_limit_w
            if isinstance(limit, int | float) and not isinstance(limit, bool):
                panel.axhline(float(limit), color=_LIMIT_COLOUR, linestyle="--", linewidth=0.9)
                panel.annotate(
                    f"limit {limit:g}",
                    xy=(1, float(limit)),
                    xycoords=("axes fraction", "data"),
                    ha="right",
                    va="bottom",
                    color=_LIMIT_COLOUR,
                    fontsize=6,
                )
        if traces and len(traces) <= 16:
            handles, labels = axes[0].get_legend_handles_labels()
            figure.legend(
                handles,
                labels,
                loc="lower center",
                ncol=min(len(labels), 16),
                fontsize=6,
                frameon=False,
                handlelength=1.2,
                columnspacing=0.8,
            )
        figure.subplots_adjust(left=0.04, right=0.995, top=0.88, bottom=0.3, wspace=0.28)
        out = io.StringIO()
        figure.savefig(out, format="svg", metadata={"Date": None, "Creator": None})
    return _inline(out.getvalue())


def _value_at(t: list[float], y: list[float], when: float) -> float:
    """The reading at the sample nearest ``when`` (a throttle event's time)."""
    if math.isnan(when) or not t:
        return math.nan
    nearest = min(range(min(len(t), len(y))), key=lambda i: abs(t[i] - when), default=None)
    return math.nan if nearest is None else y[nearest]


_NUMBER = re.compile(r"-?\d+\.\d+")


def _short(match: re.Match[str]) -> str:
    return f"{float(match.group()):.1f}".removesuffix(".0")


def _compact_path(match: re.Match[str]) -> str:
    """A path's d with 0.1 px precision (matplotlib writes 6 decimals) and no line breaks."""
    return ' d="' + " ".join(_NUMBER.sub(_short, match.group(1)).split()) + '"'


def _inline(svg: str) -> str:
    """The <svg> element alone (no XML declaration, DOCTYPE, comments or metadata, indentation and
    path precision trimmed), scaling with the page."""
    start = svg.find("<svg")
    svg = re.sub(r"<!--.*?-->|<metadata>.*?</metadata>", "", svg[start:], flags=re.S)
    svg = re.sub(r' d="([^"]*)"', _compact_path, svg)
    svg = re.sub(r">\s+<", "><", svg)
    # a fixed size in pt would overflow a narrow window; the viewBox keeps the aspect ratio
    return re.sub(r'<svg([^>]*?) width="[^"]*" height="[^"]*"', r'<svg\1 class="burn-in-chart"', svg, count=1)


def summary(fact: dict[str, Any]) -> dict[str, Any]:
    """The burn-in in one line's figures (for a node that gets no chart): per field the extreme over
    every GPU, the number of throttle events, the duration."""
    traces = _traces(fact)

    def extreme(field: str, pick: Any) -> float | None:
        # type(), not isinstance: a thousand nodes x 16 GPUs x every sample (bool is no reading)
        values = [v for g in traces for v in g.get(field) or () if type(v) is float or type(v) is int]
        values = [v for v in values if v == v]  # NaN is no reading either
        return float(pick(values)) if values else None

    return {
        "gpus": len(traces),
        "duration_s": fact.get("duration_s"),
        "max_gpu_c": extreme("gpu_c", max),
        "max_memory_c": extreme("memory_c", max),
        "min_sm_mhz": extreme("sm_mhz", min),
        "max_power_w": extreme("power_w", max),
        "events": sum(len(g.get("events") or []) for g in traces),
        "limits": fact.get("limits") if isinstance(fact.get("limits"), dict) else {},
    }
