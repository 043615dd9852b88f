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
  - With O(instances), every instance in one run (the gate's start phase is one module run per node) - each
    judged as above, waited for with its own unit first, then the others'.
  - Changes nothing, unless O(start) or O(start_marker) is given (the gate's start phase).
options:
  url:
    description:
      - Base URL of the instance, for example C(http://127.0.0.1:8000).
      - One of O(url) and O(instances) is required.
    type: str
  name:
    description: Instance name used in the check names; defaults to the URL's host:port.
    type: str
  instances:
    description:
      - Several instances in one run, each a dict with C(name) (used in the check names), C(url) (or C(port),
        with O(host)) and optionally C(unit) (its systemd unit, else O(unit_template)'s; started with O(start)
        and read while O(wait_timeout) waits) and C(baseline) (as O(baseline)). Other keys are ignored (the
        inference_service role's instance list can be given as it is). Not with O(url), O(name) or O(units).
      - The result's RV(instances) has one entry per instance, in this order.
    type: list
    elements: dict
  host:
    description: With O(instances), the address of each instance given by its C(port), C(http://<host>:<port>).
    type: str
  unit_template:
    description:
      - With O(instances), the unit of an instance without C(unit), C({name}) its name, for example
        C(vllm-{name}.service).
    type: str
  start:
    description:
      - Start each instance's C(unit) that is not active (C(systemctl start)), in order, before the wait.
        A unit that fails to start fails the module. Check mode starts nothing and waits for nothing.
    type: bool
    default: false
  start_marker:
    description:
      - A file written (C(thermal gate passed), mode 0644, its directory created 0755) before any unit is
        started, when it is not there yet - the marker the gate's vLLM units require.
    type: path
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
attributes:
  check_mode:
    details:
      - Without O(start) and O(start_marker), the same reads and checks in check mode.
      - With them, says what it would write and start, and neither starts nor waits for anything.
  diff_mode:
    support: none
extends_documentation_fragment:
  - gpufleet.node.attributes
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
instances:
  description:
    - With O(instances), per instance its C(name), C(url), C(health), C(models), C(prefix_cache) (as the
      top-level keys of a single instance; pass it as the C(baseline) of a later run) and C(checks).
  returned: with O(instances)
  type: list
  elements: dict
started:
  description: The marker written and the units started (check mode - those that would be).
  returned: with O(instances)
  type: list
  elements: str
  sample: ["/run/gpufleet/thermal-gate-passed", "vllm-glm52.service"]
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

import os
import time
from urllib.parse import urlsplit

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.node.plugins.module_utils.vllm.vllm_client import VllmClient
from ansible_collections.gpufleet.node.plugins.module_utils.vllm.vllm_instance import (
    BaselineError,
    first_unit_down,
    judge_instance,
    parse_baseline,
)

# The clock and sleep this module uses (tests replace them, not the time module's).
_monotonic = time.monotonic
_sleep = time.sleep


def _url_error(url):
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return "url %s is not an http(s) URL of a vLLM instance, e.g. http://127.0.0.1:8000" % url
    return None


def _targets(module):
    """Every instance to judge: ``{label, url, units, baseline}`` (the one O(url), or O(instances), each
    waited for with its own unit first, then those started with it)."""
    p = module.params
    if p["instances"] is None:
        return [
            dict(
                label=p["name"] or urlsplit(p["url"]).netloc,
                url=p["url"],
                units=p["units"],
                base=p["baseline"],
            )
        ]
    targets = []
    units = []
    for item in p["instances"]:
        if not isinstance(item, dict) or not item.get("name"):
            module.fail_json(msg="each of instances needs a name, got %r" % (item,))
        url = item.get("url")
        if not url and p["host"] and item.get("port") is not None:
            url = "http://%s:%s" % (p["host"], item["port"])
        if not url:
            module.fail_json(msg="instance %s needs a url (or a port, with host)" % item["name"])
        unit = item.get("unit") or (
            p["unit_template"].format(name=item["name"]) if p["unit_template"] else None
        )
        units.append(unit)
        targets.append(
            dict(label=str(item["name"]), url=url, units=[unit] if unit else [], base=item.get("baseline"))
        )
    for target in targets:
        target["units"] += [u for u in units if u and u not in target["units"]]
    return targets


def _start(module, units, marker):
    """The start marker written (the units require it), then every unit started that was not active;
    returns what changed. Check mode changes nothing and says what it would have."""
    changed = []
    if marker and not os.path.isfile(marker):
        changed.append(marker)
        if not module.check_mode:
            os.makedirs(os.path.dirname(marker), mode=0o755, exist_ok=True)
            with open(marker, "w", encoding="utf-8") as out:
                out.write("thermal gate passed\n")
            os.chmod(marker, 0o644)
    if not units:
        return changed
    systemctl = module.get_bin_path("systemctl", required=True)
    for unit in units:
        rc, out, _err = module.run_command([systemctl, "is-active", unit], environ_update={"LC_ALL": "C"})
        if rc == 0 and out.strip() == "active":
            continue
        changed.append(unit)
        if module.check_mode:
            continue
        rc, out, err = module.run_command([systemctl, "start", unit], environ_update={"LC_ALL": "C"})
        if rc != 0:
            module.fail_json(
                msg="systemctl start %s failed (rc=%d): %s" % (unit, rc, (err or out).strip()),
                checks=[],
                changes=[],
                started=changed,
                changed=True,
            )
    return changed


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type="str"),
            name=dict(type="str"),
            instances=dict(type="list", elements="dict"),
            host=dict(type="str"),
            unit_template=dict(type="str"),
            start=dict(type="bool", default=False),
            start_marker=dict(type="path"),
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
        required_one_of=[("url", "instances")],
        mutually_exclusive=[("url", "instances"), ("name", "instances"), ("units", "instances")],
        required_by={"host": "instances", "unit_template": "instances"},
        supports_check_mode=True,
    )
    p = module.params
    floor = p["min_prefix_cache_hit_rate"]
    if not 0 <= floor <= 1:
        module.fail_json(
            msg="min_prefix_cache_hit_rate is %s; a hit rate floor is 0..1 (0.5 by default)" % floor
        )
    if p["warmup_seconds"] < 0 or p["wait_timeout"] < 0 or p["timeout"] < 1:
        module.fail_json(
            msg="warmup_seconds and wait_timeout must be 0 or more and timeout 1 or more seconds"
        )
    targets = _targets(module)
    for target in targets:
        error = _url_error(target["url"])
        if error:
            module.fail_json(msg=error)
        try:
            target["base"] = parse_baseline(target["base"])
        except BaselineError as exc:
            module.fail_json(msg=str(exc))
    started = []
    if p["start"] or p["start_marker"]:
        own = [t["units"][0] for t in targets if t["units"]] if p["start"] else []
        started = _start(module, own, p["start_marker"])
        if module.check_mode:
            # nothing started, so nothing to wait for
            module.exit_json(
                changed=bool(started),
                msg="check mode: would start %s; not waited for" % (", ".join(started) or "nothing"),
                checks=[],
                changes=[],
                started=started,
                instances=[],
            )
    wait = p["wait_timeout"]
    systemctl = (
        module.get_bin_path("systemctl", required=True)
        if wait > 0 and any(t["units"] for t in targets)
        else None
    )
    judged = []
    for target in targets:
        units = target["units"]
        fetcher = VllmClient(target["url"], p["timeout"], p["validate_certs"])
        one = judge_instance(
            fetcher,
            target["label"],
            model=p["model"],
            floor=floor,
            judge_prefix=p["check_prefix_cache"],
            baseline=target["base"],
            warmup_seconds=p["warmup_seconds"],
            wait_timeout=wait,
            units_down=(lambda u=units: first_unit_down(module.run_command, systemctl, u))
            if systemctl and units
            else None,
            # looked up at each call, so a test's patched _monotonic/_sleep is the one used
            monotonic=lambda: _monotonic(),  # pylint: disable=unnecessary-lambda
            sleep=lambda s: _sleep(s),  # pylint: disable=unnecessary-lambda
        )
        one["url"] = target["url"]
        judged.append(one)
    checks = [c for one in judged for c in one["checks"]]
    result = dict(changed=bool(started), checks=checks, changes=[])
    if p["instances"] is None:
        one = judged[0]
        result.update(health=one["health"], models=one["models"], prefix_cache=one["prefix_cache"])
    else:
        result.update(instances=judged, started=started)
    failed = [c for c in checks if not c["ok"]]
    if failed:
        module.fail_json(msg="; ".join(c["message"] for c in failed), **result)
    label = targets[0]["label"] if len(targets) == 1 else "%d instances" % len(targets)
    module.exit_json(msg="%s: %d checks passed" % (label, len(checks)), **result)


if __name__ == "__main__":
    main()
