#!/usr/bin/python
# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: service_check
short_description: Check a vLLM instance - health, served models and prefix-cache hit rate from /metrics
version_added: "0.1.0"
description:
  - GETs C(/health), C(/v1/models) and C(/metrics) (Prometheus text) of one vLLM instance and returns one
    check each, C(service.health[<name>]), C(service.models[<name>]) and
    C(service.prefix_cache_hit_rate[<name>]).
  - The hit rate comes from vLLM's counters C(vllm:prefix_cache_hits_total) /
    C(vllm:prefix_cache_queries_total) (tokens; summed over engines), the 0.8-0.9 names
    C(vllm:gpu_prefix_cache_*_total), or, only from a server that exports neither (vLLM V0), the gauge
    C(vllm:gpu_prefix_cache_hit_rate). vLLM 0.11 has no such gauge; nothing here needs it.
  - Which queries it judges - with O(baseline) (the RV(prefix_cache) of an earlier run, for example before the
    burn-in) the ones since then; with O(warmup_seconds) the ones between two scrapes that far apart;
    otherwise every query since the server started.
  - B(Fails closed.) No answer, no model, or no prefix-cache query in the judged window is a failed check.
    When any check fails the module fails, naming them.
  - With O(wait_timeout) it first waits for C(/health) to answer 200 (the "wait healthy" step after start).
  - Changes nothing.
options:
  url:
    description: Base URL of the instance, for example C(http://127.0.0.1:8000).
    type: str
    required: true
  name:
    description: Instance name used in the check names; defaults to the URL's host:port.
    type: str
  model:
    description:
      - Model id C(/v1/models) must list (vLLM's C(--served-model-name), else the model path).
      - Any model passes when unset.
    type: str
  min_prefix_cache_hit_rate:
    description:
      - Floor for the prefix-cache hit rate, 0..1.
      - The default 0.5 sits between the reference deployment's steady state (about 0.9, chat traffic whose
        system prompt and history repeat) and what it falls to when a prompt template puts something
        per-request (a timestamp, a session id) in front of the shared prefix (about 0.07). Anything below
        it costs prefill compute worth investigating.
    type: float
    default: 0.5
  check_prefix_cache:
    description:
      - Judge the prefix-cache hit rate. Turn it off for the "wait healthy" step right after start, when
        no traffic has been served yet; C(/metrics) is still read once and RV(prefix_cache) returned, to be
        the O(baseline) of a later run (an unreadable C(/metrics) is then no failure).
    type: bool
    default: true
  baseline:
    description:
      - The RV(prefix_cache) of an earlier run of this module on the same instance; the hit rate is then
        judged over the queries since that run. A counter that went down (restart) counts from zero.
    type: dict
  warmup_seconds:
    description:
      - When above 0 and there is no O(baseline), scrape C(/metrics), wait this long, scrape again and judge
        the queries in between. The instance needs traffic meanwhile.
    type: int
    default: 0
  wait_timeout:
    description: Seconds to wait for C(/health) to answer 200, polling every 2 s; 0 checks once.
    type: int
    default: 0
  units:
    description:
      - The systemd units of the instances started with this one (its own first). While O(wait_timeout)
        waits, each poll reads them (C(systemctl show <unit>)); a unit that failed, stopped, is not
        installed, or whose process exited and waits to be restarted ends the wait at once, named in
        C(service.health[<name>]) - an instance that lost its GPU while starting is not waited for until
        the timeout.
      - Empty, only C(/health) is polled.
    type: list
    elements: str
    default: []
  timeout:
    description: Seconds to wait for each HTTP request.
    type: int
    default: 10
  validate_certs:
    description: Verify TLS when O(url) is https.
    type: bool
    default: true
extends_documentation_fragment:
  - gpufleet.node.attributes.read_only
seealso:
  - name: vLLM metrics
    description: The metric names vLLM exports on /metrics.
    link: https://docs.vllm.ai/en/latest/design/metrics.html
  - module: gpufleet.node.burn_in
author:
  - gpufleet developers (!UNKNOWN)
"""

EXAMPLES = r"""
# post_maintenance order: ... gate -> start instances -> wait healthy (1) -> burn-in -> prefix cache (2)
# -> mark passed -> undrain.
- name: Wait until each instance is healthy and take the prefix-cache baseline (1)
  gpufleet.node.service_check:
    url: "http://127.0.0.1:{{ item.port }}"
    name: "{{ item.name }}"
    wait_timeout: 900
    check_prefix_cache: false  # no traffic yet: health and models, and the counters as a baseline
  loop: "{{ inference_service_instances }}"
  loop_control:
    label: "{{ item.name }}"
  register: before

- name: Burn in (its requests are the traffic the next check judges)
  gpufleet.node.burn_in:
    ports: "{{ inference_service_instances | map(attribute='port') | list }}"

- name: Prefix-cache hit rate over the queries since the baseline (2)
  gpufleet.node.service_check:
    url: "http://127.0.0.1:{{ item.0.port }}"
    name: "{{ item.0.name }}"
    baseline: "{{ item.1.prefix_cache }}"
    min_prefix_cache_hit_rate: "{{ thermal_gate_min_prefix_cache_hit_rate }}"
  loop: "{{ inference_service_instances | zip(before.results) }}"
  loop_control:
    label: "{{ item.0.name }}"

- name: Hit rate of live traffic over one minute (a serving node)
  gpufleet.node.service_check:
    url: http://127.0.0.1:8000
    warmup_seconds: 60
"""

RETURN = r"""
# changes (always empty) and the type of checks: the no_changes and checks fragments
extends_documentation_fragment: [gpufleet.node.no_changes, gpufleet.node.checks]
checks:
  description:
    - C(service.health[<name>]) (value the HTTP status or the error), C(service.models[<name>]) (value the
      model ids) and, with O(check_prefix_cache), C(service.prefix_cache_hit_rate[<name>])
      (value the rate, null when there was no query to judge).
  sample:
    - {"name": "service.prefix_cache_hit_rate[glm52]", "ok": false, "value": 0.0712, "limit": 0.5,
       "unit": "ratio", "message": "glm52 prefix-cache hit rate 0.0712 over 184320 queried tokens since
       the baseline, below the 0.5 floor"}
health:
  description: HTTP status of C(/health), or null when it did not answer.
  returned: always
  type: int
  sample: 200
models:
  description: Model ids C(/v1/models) lists.
  returned: always
  type: list
  elements: str
  sample: ["GLM-5.2-NVFP4"]
prefix_cache:
  description:
    - The last scrape's counter totals (C(queries),
      C(hits), C(source); pass this dict as O(baseline) later), the judged window (C(window) - lifetime,
      since_baseline or warmup - with C(window_queries), C(window_hits), C(reset)), the judged
      C(hit_rate), and C(prefix_caching_enabled) from C(vllm:cache_config_info) (null when not exported).
  returned: always
  type: dict
  sample: {"queries": 10931263819.0, "hits": 630469280.0, "source": "vllm:prefix_cache_queries_total",
           "hit_rate": 0.0577, "window": "lifetime", "window_queries": 10931263819.0,
           "window_hits": 630469280.0, "reset": false, "prefix_caching_enabled": true}
"""

import time
from urllib.parse import urlsplit

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.node.plugins.module_utils.core.results import check as _check
from ansible_collections.gpufleet.node.plugins.module_utils.vllm.vllm_client import VllmClient
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
    prefix_cache_name,
    unit_down,
    unit_properties,
)

_POLL_S = 2.0
# The clock and sleep this module uses (tests replace them, not the time module's).
_monotonic = time.monotonic
_sleep = time.sleep


def _unit_down(module, systemctl, units):
    """``(unit, why)`` of the first unit that will not become healthy (vllm_service.unit_down), else
    None. A unit whose state cannot be read is not judged here: /health still is."""
    for unit in units:
        rc, out, _err = module.run_command([systemctl, "show", unit], environ_update={"LC_ALL": "C"})
        why = unit_down(unit_properties(out)) if rc == 0 else None
        if why is not None:
            return unit, why
    return None


def _health(module, fetcher, label, wait_timeout):
    units = module.params["units"]
    systemctl = module.get_bin_path("systemctl", required=True) if units and wait_timeout > 0 else None
    started = _monotonic()
    deadline = started + max(wait_timeout, 0)
    while True:
        status, text = fetcher.get("/health")
        if status == 200 or _monotonic() >= deadline:
            break
        down = _unit_down(module, systemctl, units) if systemctl else None
        if down is not None:
            waited = round(_monotonic() - started)
            return status, health_check(label, status, text, waited, stopped_by=down)
        _sleep(_POLL_S)
    return status, health_check(label, status, text, wait_timeout)


def _models(fetcher, label, model):
    status, ids, text = fetcher.models()
    name = "service.models[%s]" % label
    if status != 200:
        return ids, _check(name, False, ids, model, "", "%s /v1/models answers %s" % (label, status or text))
    if model is not None:
        ok = model in ids
        msg = (
            "%s serves %s" % (label, model)
            if ok
            else "%s does not serve %s; it lists: %s"
            % (
                label,
                model,
                ", ".join(ids) or "nothing",
            )
        )
        return ids, _check(name, ok, ids, model, "", msg)
    return ids, _check(name, bool(ids), ids, None, "", "%s lists %s" % (label, ", ".join(ids) or "no model"))


def _scrape(fetcher):
    status, text = fetcher.get("/metrics")
    if status != 200:
        return None, "/metrics answers %s" % (status or text)
    try:
        return parse_prometheus(text), None
    except MetricsError as exc:
        return None, "/metrics is not Prometheus text (%s)" % exc


def _baseline(module):
    base = module.params["baseline"]
    if base is None:
        return None
    try:
        return {"queries": float(base["queries"]), "hits": float(base["hits"]), "source": base.get("source")}
    except (KeyError, TypeError, ValueError):
        module.fail_json(
            msg="baseline must be the prefix_cache dict of an earlier service_check run (queries and hits)"
        )


def _prefix_check(module, fetcher, label, judge):
    """(prefix_cache result, check); without judge one scrape for the totals and no check."""
    p = module.params
    floor = p["min_prefix_cache_hit_rate"]
    name = prefix_cache_name(label)
    metrics, error = _scrape(fetcher)
    window = "lifetime"
    before = _baseline(module) if judge else None
    if metrics is not None and before is None and judge and p["warmup_seconds"] > 0:
        before = prefix_cache(metrics)
        window = "warmup"
        _sleep(p["warmup_seconds"])
        metrics, error = _scrape(fetcher)
    elif before is not None:
        window = "since_baseline"
    if metrics is None:
        info = {"queries": None, "hits": None, "source": None, "hit_rate": None, "window": window}
        return info, _check(name, False, None, floor, "ratio", "%s %s (fail closed)" % (label, error))
    now = prefix_cache(metrics)
    config = cache_config(metrics)
    enabled = (
        None
        if config is None or "enable_prefix_caching" not in config
        else (config["enable_prefix_caching"].lower() == "true")
    )
    if window == "lifetime":
        judged = {"queries": now["queries"], "hits": now["hits"], "hit_rate": now["hit_rate"], "reset": False}
    else:
        judged = (
            hit_rate_between(before, now)
            if before["queries"] is not None
            else {
                "queries": None,
                "hits": None,
                "hit_rate": now["hit_rate"],
                "reset": False,
            }
        )
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
        msg = "%s exports no prefix-cache metric (vllm:prefix_cache_queries_total); is it vLLM?" % label
        if enabled is False:
            msg = "%s runs with prefix caching off (enable_prefix_caching=False)" % label
        return info, _check(name, False, None, floor, "ratio", msg + " (fail closed)")
    return info, prefix_cache_check(label, rate, floor, judged["queries"], where)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type="str", required=True),
            name=dict(type="str"),
            model=dict(type="str"),
            min_prefix_cache_hit_rate=dict(type="float", default=0.5),
            check_prefix_cache=dict(type="bool", default=True),
            baseline=dict(type="dict"),
            warmup_seconds=dict(type="int", default=0),
            wait_timeout=dict(type="int", default=0),
            units=dict(type="list", elements="str", default=[]),
            timeout=dict(type="int", default=10),
            validate_certs=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    parts = urlsplit(p["url"])
    if parts.scheme not in ("http", "https") or not parts.netloc:
        module.fail_json(
            msg="url %s is not an http(s) URL of a vLLM instance, e.g. http://127.0.0.1:8000" % p["url"]
        )
    floor = p["min_prefix_cache_hit_rate"]
    if not 0 <= floor <= 1:
        module.fail_json(
            msg="min_prefix_cache_hit_rate is %s; a hit rate floor is 0..1 (0.5 by default)" % floor
        )
    if p["warmup_seconds"] < 0 or p["wait_timeout"] < 0 or p["timeout"] < 1:
        module.fail_json(
            msg="warmup_seconds and wait_timeout must be 0 or more and timeout 1 or more seconds"
        )
    label = p["name"] or parts.netloc
    fetcher = VllmClient(p["url"], p["timeout"], p["validate_certs"])
    status, health = _health(module, fetcher, label, p["wait_timeout"])
    ids, models = _models(fetcher, label, p["model"])
    checks = [health, models]
    info, cache = _prefix_check(module, fetcher, label, p["check_prefix_cache"])
    if p["check_prefix_cache"]:
        checks.append(cache)
    result = dict(changed=False, checks=checks, health=status, models=ids, prefix_cache=info, changes=[])
    failed = [c for c in checks if not c["ok"]]
    if failed:
        module.fail_json(msg="; ".join(c["message"] for c in failed), **result)
    module.exit_json(msg="%s: %d checks passed" % (label, len(checks)), **result)


if __name__ == "__main__":
    main()
