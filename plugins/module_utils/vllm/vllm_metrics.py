# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""vLLM's Prometheus /metrics: text in, samples and the prefix-cache hit rate out.

vLLM V1 exports the prefix cache as two counters, in tokens:
``vllm:prefix_cache_queries_total`` (tokens looked up) and ``vllm:prefix_cache_hits_total``
(tokens found), one series per engine and model (labels ``engine``, ``model_name``).
Releases 0.8-0.9 named them ``vllm:gpu_prefix_cache_queries_total`` /
``vllm:gpu_prefix_cache_hits_total``; V0 exported only a gauge,
``vllm:gpu_prefix_cache_hit_rate`` (0..1). The hit rate is hits / queries summed over the
series; between two scrapes it is the ratio of the increases, which is what a floor should
judge (the lifetime ratio of a long-running server hides a recent collapse).

Runs on the managed node (Python 3.11, stdlib only).
"""

from __future__ import annotations

import math
import re

# (current name, 0.8-0.9 name) per counter, as exposed (with _total).
QUERIES = ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total")
HITS = ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total")
GAUGE = "vllm:gpu_prefix_cache_hit_rate"

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_SAMPLE = re.compile(r"^(" + _NAME + r")(?:\{(.*)\})?\s+(\S+)(?:\s+(-?\d+))?\s*$")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)')
_SPECIAL = {"+inf": math.inf, "inf": math.inf, "-inf": -math.inf, "nan": math.nan}


# What every MetricsError message starts with.
TOOL = "vLLM /metrics"


class MetricsError(ValueError):
    """Raised when /metrics is not Prometheus text, or its prefix-cache readings are impossible."""


def _unescape(value):
    return value.replace("\\\\", "\0").replace('\\"', '"').replace("\\n", "\n").replace("\0", "\\")


def _labels(text, line_no):
    labels, pos = {}, 0
    text = text.strip()
    while pos < len(text):
        match = _LABEL.match(text, pos)
        if not match:
            raise MetricsError("line %d: malformed labels {%s}" % (line_no, text))
        labels[match.group(1)] = _unescape(match.group(2))
        pos = match.end()
    return labels


def _value(text, line_no):
    special = _SPECIAL.get(text.lower())
    if special is not None:
        return special
    try:
        # float() takes Arabic-Indic and full-width digits too, and '1_0' as 10
        if not text.isascii() or "_" in text:
            raise ValueError(text)
        return float(text)
    except ValueError:
        raise MetricsError("line %d: %r is not a sample value" % (line_no, text)) from None


def parse_prometheus(text):
    """Prometheus text exposition -> ``{"samples": [{name, labels, value}], "types": {name: type}}``.

    HELP lines and blank lines are skipped; a cut-off last line (``head``) is ignored when it is
    a comment. Values are floats (``1.0931263819e+10``, ``+Inf``, ``NaN``). The text must end with
    a newline, as the format requires (a body cut inside a value, '900' read as '9', is refused),
    and a series may appear once. The prefix-cache readings must be possible: counters finite and
    >= 0, hits of a series <= its queries, the V0 gauge within 0..1. Raises MetricsError, whose
    message starts with TOOL.
    """
    try:
        metrics = _parse(text)
        _check_prefix_cache(metrics)
    except MetricsError as exc:
        raise MetricsError("%s: %s" % (TOOL, exc)) from None
    except (ValueError, LookupError, TypeError, AttributeError, ArithmeticError, RecursionError) as exc:
        raise MetricsError("%s: unreadable response (%s)" % (TOOL, exc)) from None
    return metrics


def _series(sample):
    return sample["name"], tuple(sorted(sample["labels"].items()))


def _check_prefix_cache(metrics):
    values = {_series(s): s["value"] for s in metrics["samples"]}
    for (name, _labels), value in values.items():
        if name in QUERIES + HITS and not (math.isfinite(value) and value >= 0):
            raise MetricsError("counter %s is %r, not a finite count >= 0" % (name, value))
        if name == GAUGE and not (math.isfinite(value) and 0 <= value <= 1):
            raise MetricsError("%s is %r, not a ratio within 0..1" % (GAUGE, value))
    for queries_name, hits_name in zip(QUERIES, HITS, strict=True):
        for (name, labels), hits in values.items():
            if name != hits_name:
                continue
            queries = values.get((queries_name, labels))
            if queries is None or hits > queries:
                raise MetricsError(
                    "%s %r with %s %r for the same series: more hits than queries"
                    % (hits_name, hits, queries_name, queries)
                )
        total = sum(v for (name, _labels), v in values.items() if name in (queries_name, hits_name))
        if not math.isfinite(total):
            raise MetricsError("%s / %s add up past a float" % (queries_name, hits_name))


def _parse(text):
    if not isinstance(text, str) or not text.strip():
        raise MetricsError("empty response")
    if "\n" not in text[len(text.rstrip()) :]:
        raise MetricsError("the response does not end with a newline (cut short?)")
    samples, types, seen = [], {}, set()
    for line_no, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 4 and parts[1] == "TYPE":
                types[parts[2]] = parts[3].strip()
            continue
        match = _SAMPLE.match(line)
        if not match:
            raise MetricsError("line %d is not a Prometheus sample: %r" % (line_no, line[:120]))
        name, labels, value = match.group(1), match.group(2), match.group(3)
        sample = {
            "name": name,
            "labels": _labels(labels, line_no) if labels else {},
            "value": _value(value, line_no),
        }
        if _series(sample) in seen:
            raise MetricsError("line %d repeats the series %s" % (line_no, line[:120]))
        seen.add(_series(sample))
        samples.append(sample)
    if not samples:
        raise MetricsError("no samples")
    return {"samples": samples, "types": types}


def _matches(sample, model_name):
    return model_name is None or sample["labels"].get("model_name") == model_name


def _sum(metrics, names, model_name):
    """Sum of the first name in names that has series (for the model); None when none has."""
    for name in names:
        values = [s["value"] for s in metrics["samples"] if s["name"] == name and _matches(s, model_name)]
        if values:
            return sum(values), name
    return None, None


def prefix_cache(metrics, model_name=None):
    """Prefix-cache counters and hit rate of one scrape.

    Returns ``{queries, hits, hit_rate, source, models}``: source is the counter name used, or the
    gauge name when only vLLM V0's hit-rate gauge is there, or None. hit_rate is None when there
    were no queries yet. ``models`` lists the model_name labels seen on the counters. The
    readings were checked by parse_prometheus, so hit_rate is within 0..1.
    """
    queries, qname = _sum(metrics, QUERIES, model_name)
    hits, _hits_name = _sum(metrics, HITS, model_name)
    models = sorted(
        {
            s["labels"]["model_name"]
            for s in metrics["samples"]
            if s["name"] in QUERIES + HITS + (GAUGE,) and "model_name" in s["labels"]
        }
    )
    if queries is not None and hits is not None:
        rate = hits / queries if queries > 0 else None
        return {"queries": queries, "hits": hits, "hit_rate": rate, "source": qname, "models": models}
    gauges = [s["value"] for s in metrics["samples"] if s["name"] == GAUGE and _matches(s, model_name)]
    gauges = [g for g in gauges if math.isfinite(g) and 0 <= g <= 1]
    if gauges:
        return {
            "queries": None,
            "hits": None,
            "hit_rate": sum(gauges) / len(gauges),
            "source": GAUGE,
            "models": models,
        }
    return {"queries": None, "hits": None, "hit_rate": None, "source": None, "models": models}


def hit_rate_between(before, after):
    """Hit rate over the queries between two prefix_cache() results.

    Returns ``{queries, hits, hit_rate, reset}``. A counter that went down (the server restarted)
    counts from zero, as Prometheus' rate() does. With only the V0 gauge the second reading is used.
    hit_rate is None when no query happened in between.
    """
    if after["source"] == GAUGE or before["queries"] is None or after["queries"] is None:
        return {"queries": None, "hits": None, "hit_rate": after["hit_rate"], "reset": False}
    reset = (
        not _possible(before)
        or after["queries"] < before["queries"]
        or after["hits"] < before["hits"]
        # more new hits than new queries: the two scrapes are not of one run of the counters
        or after["hits"] - before["hits"] > after["queries"] - before["queries"]
    )
    dq = after["queries"] if reset else after["queries"] - before["queries"]
    dh = after["hits"] if reset else after["hits"] - before["hits"]
    return {"queries": dq, "hits": dh, "hit_rate": dh / dq if dq > 0 else None, "reset": reset}


def _possible(counts):
    """Counters a scrape can hold: finite, >= 0, hits <= queries (a baseline comes from outside)."""
    queries, hits = counts.get("queries"), counts.get("hits")
    return (
        isinstance(queries, (int, float))
        and isinstance(hits, (int, float))
        and math.isfinite(queries)
        and math.isfinite(hits)
        and 0 <= hits <= queries
    )


def cache_config(metrics):
    """``vllm:cache_config_info`` labels (enable_prefix_caching, block_size, ...) or None."""
    for sample in metrics["samples"]:
        if sample["name"] == "vllm:cache_config_info":
            return dict(sample["labels"])
    return None


# What an instance is doing, across vLLM's renames: (current name, older names...). The gauges are
# read from the later scrape, the counters as increases between two (a counter that went down, a
# restart, counts from zero as Prometheus' rate() does).
GENERATION_TOKENS = ("vllm:generation_tokens_total",)
PREEMPTIONS = ("vllm:num_preemptions_total", "vllm:num_preemptions")
REQUESTS_RUNNING = ("vllm:num_requests_running",)
REQUESTS_WAITING = ("vllm:num_requests_waiting",)
# V1 (>= 0.8) exports kv_cache_usage_perc; V0 gpu_cache_usage_perc. Both are 0..1 despite the name.
KV_CACHE_USAGE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")


def _rate(before, after, names, seconds):
    old = _sum(before, names, None)[0]
    new = _sum(after, names, None)[0]
    if new is None or old is None or not seconds > 0:
        return None
    return (new - old if new >= old else new) / seconds


def serving(before, after, seconds):
    """What an instance served between two parse_prometheus() scrapes ``seconds`` apart:
    ``{generation_tokens_per_second, preemptions_per_second, requests_running, requests_waiting,
    kv_cache_usage_ratio}``; a reading the instance does not export is None."""
    running = _sum(after, REQUESTS_RUNNING, None)[0]
    waiting = _sum(after, REQUESTS_WAITING, None)[0]
    usage = [s["value"] for s in after["samples"] if s["name"] == _first_present(after, KV_CACHE_USAGE)]
    return {
        "generation_tokens_per_second": _rate(before, after, GENERATION_TOKENS, seconds),
        "preemptions_per_second": _rate(before, after, PREEMPTIONS, seconds),
        "requests_running": running,
        "requests_waiting": waiting,
        # engines share the cache budget of their GPUs: the fullest one is the one that preempts
        "kv_cache_usage_ratio": max(usage) if usage else None,
    }


def _first_present(metrics, names):
    for name in names:
        if any(s["name"] == name for s in metrics["samples"]):
            return name
    return None
