# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One vLLM instance judged through its client, once: the wait until ``/health`` answers (ended early by
a unit that will not become healthy), the served models and the prefix-cache hit rate over a window.

The gate's start phase (service_check: every instance started, waited for and its baseline taken in one
module run) and its burn-in (burn_in: every instance's health, models and hit rate since that baseline
when the load ends) call ``judge_instance``; the verdicts themselves are vllm_service's.

Runs on the managed node (Python 3.11); the clock, the sleep and the unit reader are given by the caller
(the modules' own, which their tests replace).
"""

from __future__ import annotations

from ansible_collections.gpufleet.node.plugins.module_utils.core.results import check
from ansible_collections.gpufleet.node.plugins.module_utils.vllm.vllm_metrics import (
    MetricsError,
    cache_config,
    hit_rate_between,
    parse_prometheus,
    prefix_cache,
)
from ansible_collections.gpufleet.node.plugins.module_utils.vllm.vllm_service import (
    health_check,
    prefix_cache_check,
    unit_down,
    unit_properties,
)

POLL_S = 2.0
BASELINE_ERROR = "baseline must be the prefix_cache dict of an earlier service_check run (queries and hits)"


class BaselineError(ValueError):
    """A baseline that is not the prefix_cache dict of an earlier run."""


def first_unit_down(run_command, systemctl, units):
    """``(unit, why)`` of the first unit that will not become healthy (vllm_service.unit_down), else
    None. A unit whose state cannot be read is not judged here: /health still is."""
    for unit in units:
        rc, out, _err = run_command([systemctl, "show", unit], environ_update={"LC_ALL": "C"})
        why = unit_down(unit_properties(out)) if rc == 0 else None
        if why is not None:
            return unit, why
    return None


def wait_health(fetcher, label, wait_timeout, units_down, monotonic, sleep):
    """``(status, service.health check)``: /health polled every POLL_S until 200 or ``wait_timeout``;
    ``units_down()`` (or None) is asked at each poll and ends the wait at once with its ``(unit, why)``."""
    started = monotonic()
    deadline = started + max(wait_timeout, 0)
    while True:
        status, text = fetcher.get("/health")
        if status == 200 or monotonic() >= deadline:
            break
        down = units_down() if units_down is not None else None
        if down is not None:
            waited = round(monotonic() - started)
            return status, health_check(label, status, text, waited, stopped_by=down)
        sleep(POLL_S)
    return status, health_check(label, status, text, wait_timeout)


def models_check(fetcher, label, model):
    """``(model ids, service.models check)``."""
    status, ids, text = fetcher.models()
    name = "service.models[%s]" % label
    if status != 200:
        return ids, check(name, False, ids, model, "", "%s /v1/models answers %s" % (label, status or text))
    if model is not None:
        ok = model in ids
        msg = (
            "%s serves %s" % (label, model)
            if ok
            else "%s does not serve %s; it lists: %s" % (label, model, ", ".join(ids) or "nothing")
        )
        return ids, check(name, ok, ids, model, "", msg)
    return ids, check(name, bool(ids), ids, None, "", "%s lists %s" % (label, ", ".join(ids) or "no model"))


def scrape(fetcher):
    """``(parsed /metrics, None)`` or ``(None, why)``."""
    status, text = fetcher.get("/metrics")
    if status != 200:
        return None, "/metrics answers %s" % (status or text)
    try:
        return parse_prometheus(text), None
    except MetricsError as exc:
        return None, "/metrics is not Prometheus text (%s)" % exc


def parse_baseline(base):
    """The counters of an earlier run's prefix_cache (None stays None); BaselineError otherwise."""
    if base is None:
        return None
    try:
        return {"queries": float(base["queries"]), "hits": float(base["hits"]), "source": base.get("source")}
    except (KeyError, TypeError, ValueError) as exc:
        raise BaselineError(BASELINE_ERROR) from exc


def prefix_reading(fetcher, label, floor, judge, before, warmup_seconds, sleep):
    """``(prefix_cache result, check)``; without ``judge`` one scrape for the totals and no verdict
    (its check is still built: the caller leaves it out). ``before``: parse_baseline's counters."""
    metrics, error = scrape(fetcher)
    window = "lifetime"
    before = before if judge else None
    if metrics is not None and before is None and judge and warmup_seconds > 0:
        before = prefix_cache(metrics)
        window = "warmup"
        sleep(warmup_seconds)
        metrics, error = scrape(fetcher)
    elif before is not None:
        window = "since_baseline"
    if metrics is None:
        info = {"queries": None, "hits": None, "source": None, "hit_rate": None, "window": window}
        return info, prefix_cache_check(label, None, floor, None, window, unread=error)
    now = prefix_cache(metrics)
    config = cache_config(metrics)
    enabled = (
        None
        if config is None or "enable_prefix_caching" not in config
        else (config["enable_prefix_caching"].lower() == "true")
    )
    if window == "lifetime":
        judged = {"queries": now["queries"], "hits": now["hits"], "hit_rate": now["hit_rate"], "reset": False}
    elif before["queries"] is not None:
        judged = hit_rate_between(before, now)
    else:
        judged = {"queries": None, "hits": None, "hit_rate": now["hit_rate"], "reset": False}
    rate = judged["hit_rate"]
    info = {
        "queries": now["queries"],
        "hits": now["hits"],
        "source": now["source"],
        "hit_rate": None if rate is None else round(rate, 4),
        "window": window,
        "window_queries": judged["queries"],
        "window_hits": judged["hits"],
        "reset": judged["reset"],
        "prefix_caching_enabled": enabled,
    }
    where = {
        "lifetime": "since the server started",
        "since_baseline": "since the baseline",
        "warmup": "in the warm-up",
    }[window]
    if now["source"] is None:
        why = "exports no prefix-cache metric (vllm:prefix_cache_queries_total); is it vLLM?"
        if enabled is False:
            why = "runs with prefix caching off (enable_prefix_caching=False)"
        return info, prefix_cache_check(label, None, floor, None, where, unread=why)
    return info, prefix_cache_check(label, rate, floor, judged["queries"], where)


def judge_instance(
    fetcher,
    label,
    *,
    model=None,
    floor=0.5,
    judge_prefix=True,
    baseline=None,
    warmup_seconds=0,
    wait_timeout=0,
    units_down=None,
    monotonic,
    sleep,
):
    """One instance: ``{name, health, models, prefix_cache, checks}``; the checks are
    ``service.health``, ``service.models`` and (with ``judge_prefix``) ``service.prefix_cache_hit_rate``.
    ``baseline``: parse_baseline's counters."""
    status, health = wait_health(fetcher, label, wait_timeout, units_down, monotonic, sleep)
    ids, models = models_check(fetcher, label, model)
    checks = [health, models]
    info, cache = prefix_reading(fetcher, label, floor, judge_prefix, baseline, warmup_seconds, sleep)
    if judge_prefix:
        checks.append(cache)
    return {"name": label, "health": status, "models": ids, "prefix_cache": info, "checks": checks}
