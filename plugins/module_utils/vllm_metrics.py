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


class MetricsError(ValueError):
    """Raised when /metrics is not Prometheus text."""


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
        return float(text)
    except ValueError:
        raise MetricsError("line %d: %r is not a sample value" % (line_no, text)) from None


def parse_prometheus(text):
    """Prometheus text exposition -> ``{"samples": [{name, labels, value}], "types": {name: type}}``.

    HELP lines and blank lines are skipped; a cut-off last line (``head``) is ignored when it is
    a comment. Values are floats (``1.0931263819e+10``, ``+Inf``, ``NaN``).
    """
    if not isinstance(text, str) or not text.strip():
        raise MetricsError("empty /metrics response")
    samples, types = [], {}
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
        samples.append(
            {
                "name": name,
                "labels": _labels(labels, line_no) if labels else {},
                "value": _value(value, line_no),
            }
        )
    if not samples:
        raise MetricsError("/metrics has no samples")
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
    were no queries yet. ``models`` lists the model_name labels seen on the counters.
    """
    queries, qname = _sum(metrics, QUERIES, model_name)
    hits, _ = _sum(metrics, HITS, model_name)
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
    gauges = [g for g in gauges if not math.isnan(g)]
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
    reset = after["queries"] < before["queries"] or after["hits"] < before["hits"]
    dq = after["queries"] if reset else after["queries"] - before["queries"]
    dh = after["hits"] if reset else after["hits"] - before["hits"]
    return {"queries": dq, "hits": dh, "hit_rate": dh / dq if dq > 0 else None, "reset": reset}


def cache_config(metrics):
    """``vllm:cache_config_info`` labels (enable_prefix_caching, block_size, ...) or None."""
    for sample in metrics["samples"]:
        if sample["name"] == "vllm:cache_config_info":
            return dict(sample["labels"])
    return None
