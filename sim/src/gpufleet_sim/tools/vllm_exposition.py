"""The stand-in vLLM's /metrics, in the Prometheus text format (0.0.4) or, for a scraper that asks
with `Accept: application/openmetrics-text`, in OpenMetrics 1.0.0, as prometheus_client renders them
for vLLM 0.11.

Metric names, HELP texts and number formatting follow the real exposition in
tests/fixtures/real/vllm-metrics (vLLM V1) and vLLM 0.11's loggers. V0's
vllm:gpu_prefix_cache_hit_rate gauge is gone, as it is from 0.11: the hit rate is
prefix_cache_hits_total / prefix_cache_queries_total. Runs on the node: stdlib only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpufleet_sim.tools.vllm_engine import Engine
from gpufleet_sim.tools.vllm_stats import HISTOGRAMS, Histogram

TEXT = "text/plain; version=0.0.4; charset=utf-8"
OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"

Labels = dict[str, str]


def go_float(value: float) -> str:
    """Go-style floats as the real exposition prints them: 1.0931263819e+10, 0.0, 1.7869106011177013e+09."""
    value = float(value)
    if value == float("inf"):
        return "+Inf"
    text = repr(value)
    dot = text.find(".")
    if value > 0 and dot > 6:
        mantissa = f"{text[0]}.{text[1:dot]}{text[dot + 1 :]}".rstrip("0.")
        return f"{mantissa}e+{dot - 1:02d}"
    return text


def wants_openmetrics(accept: str | None) -> bool:
    """prometheus_client's choice: any Accept entry whose media type is OpenMetrics."""
    return any(
        part.split(";")[0].strip() == "application/openmetrics-text" for part in (accept or "").split(",")
    )


@dataclass
class Family:
    """One metric: its base name (a counter's without _total), kind, HELP and samples, each a
    (suffix, labels, value); counters and histograms carry their creation time too."""

    name: str
    kind: str
    help: str
    samples: list[tuple[str, Labels, float]] = field(default_factory=list)
    created: list[tuple[Labels, float]] = field(default_factory=list)


def _labels(labels: Labels) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def _line(name: str, labels: Labels, value: float) -> str:
    return f"{name}{_labels(labels)} {go_float(value)}"


def text(families: list[Family]) -> str:
    """Prometheus text 0.0.4: a counter's HELP/TYPE name ends in _total; _created samples are a
    gauge family of their own after their metric."""
    lines: list[str] = []
    for f in families:
        head = f"{f.name}_total" if f.kind == "counter" else f.name
        lines += [f"# HELP {head} {f.help}", f"# TYPE {head} {f.kind}"]
        lines += [_line(f.name + suffix, labels, value) for suffix, labels, value in f.samples]
        if f.created:
            lines += [f"# HELP {f.name}_created {f.help}", f"# TYPE {f.name}_created gauge"]
            lines += [_line(f"{f.name}_created", labels, ts) for labels, ts in f.created]
    return "\n".join(lines) + "\n"


def _series(labels: Labels) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in labels.items() if k != "le"))


def openmetrics(families: list[Family]) -> str:
    """OpenMetrics 1.0.0: the family named without _total, `# EOF` last; a series' _created right
    after its other samples (the format wants each series' samples together)."""
    lines: list[str] = []
    for f in families:
        lines += [f"# HELP {f.name} {f.help}", f"# TYPE {f.name} {f.kind}"]
        created = {_series(labels): ts for labels, ts in f.created}
        for i, (suffix, labels, value) in enumerate(f.samples):
            lines.append(_line(f.name + suffix, labels, value))
            series = _series(labels)
            last = i + 1 == len(f.samples) or _series(f.samples[i + 1][1]) != series
            if last and series in created:
                lines.append(_line(f"{f.name}_created", dict(series), created[series]))
    return "\n".join([*lines, "# EOF"]) + "\n"


def _histogram(name: str, help_text: str, base: Labels, h: Histogram, created: float) -> Family:
    family = Family(name, "histogram", help_text, created=[(base, created)])
    for bound, count in zip((*h.bounds, float("inf")), h.counts, strict=True):
        family.samples.append(("_bucket", {**base, "le": go_float(bound)}, count))
    family.samples += [("_count", base, h.counts[-1]), ("_sum", base, h.total)]
    return family


# (name, kind, HELP, snapshot key) in the order vLLM V1 registers them.
_SERIES = (
    ("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.", "running"),
    ("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", "waiting"),
    ("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", "kv_usage"),
    (
        "vllm:prefix_cache_queries",
        "counter",
        "Prefix cache queries, in terms of number of queried tokens.",
        "queries",
    ),
    ("vllm:prefix_cache_hits", "counter", "Prefix cache hits, in terms of number of cached tokens.", "hits"),
    ("vllm:num_preemptions", "counter", "Cumulative number of preemption from the engine.", "preemptions"),
    ("vllm:prompt_tokens", "counter", "Number of prefill tokens processed.", "prompt_tokens"),
    ("vllm:generation_tokens", "counter", "Number of generation tokens processed.", "generation_tokens"),
)


def families(engine: Engine) -> list[Family]:
    snap: dict[str, Any] = engine.snapshot()
    config = engine.config
    base = {"engine": "0", "model_name": config.served_name}
    created = float(snap["created"])
    found: list[Family] = []
    for name, kind, help_text, key in _SERIES:
        if kind == "counter":
            found.append(Family(name, kind, help_text, [("_total", base, snap[key])], [(base, created)]))
        else:
            found.append(Family(name, kind, help_text, [("", base, snap[key])]))
    success = Family("vllm:request_success", "counter", "Count of successfully processed requests.")
    for reason, count in sorted(snap["success"].items()):
        labels = {**base, "finished_reason": reason}
        success.samples.append(("_total", labels, count))
        success.created.append((labels, created))
    found.append(success)
    for name, help_text, _ in HISTOGRAMS:
        found.append(_histogram(name, help_text, base, snap["histograms"][name], created))
    info = {
        "block_size": "16",
        "cache_dtype": "auto",
        "enable_prefix_caching": str(config.prefix_caching),
        "engine": "0",
        "gpu_memory_utilization": str(config.gpu_memory_utilization),
        "kv_cache_size_tokens": str(engine.kv_capacity_tokens),
        "num_gpu_blocks": str(engine.kv_capacity_tokens // 16),
        "swap_space": str(config.swap_space),
    }
    found.append(
        Family(
            "vllm:cache_config_info", "gauge", "Information of the LLMEngine CacheConfig", [("", info, 1.0)]
        )
    )
    return found


def render(engine: Engine, accept: str | None) -> tuple[str, str]:
    """(body, content type) for a scrape with this Accept header."""
    if wants_openmetrics(accept):
        return openmetrics(families(engine)), OPENMETRICS
    return text(families(engine)), TEXT
