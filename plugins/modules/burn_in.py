#!/usr/bin/python
# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: burn_in
short_description: Load the node's vLLM instances for a few minutes and fail on throttling or heat
version_added: "0.1.0"
description:
  - Sends small-batch OpenAI C(/v1/completions) requests to the local instances (O(urls) or O(ports)),
    O(concurrency) at a time per instance, for O(seconds), while sampling every GPU once per
    O(sample_interval) with one C(nvidia-smi --query-gpu=uuid,index,temperature.gpu,temperature.memory,
    temperature.gpu.tlimit,clocks_event_reasons.active,utilization.gpu,power.draw,clocks.sm
    --format=csv,noheader,nounits) call.
  - This is the check an idle gate cannot make. A loop with too little flow keeps GPUs cool at rest and
    lets them throttle minutes into real load.
  - A sample is bad when a GPU is past a temperature limit, below the T.Limit margin, shows a forbidden
    clock event reason, misses a reading, or is missing altogether. The first bad sample is returned
    (RV(first_bad_sample)) and, with O(stop_on_first_bad), ends the load at once.
  - With O(roce_ports) (the default) it also reads the counters and the links of the node's RoCE ports
    when the load starts and when it stops, and judges retransmits, drops, pauses and the ECN loop over the
    burn-in, each link up at its end (C(rdma_link.link_state[<dev>])) at the rate it started with
    (C(fabric.link_rate[<dev>])) with no link-down event between (C(fabric.link_flaps[<dev>]), from
    C(link_down_events_phy) and C(carrier_down_count)), and each port's share of the load next to its
    siblings (C(fabric.traffic[<dev>])) - a port that carried nothing has counters that prove nothing.
  - Fails when any check fails (a bad sample, no completed request, more failed requests than
    O(max_failed_requests), nvidia-smi failing, a RoCE port misbehaving under the load). The checks and
    the summary are in the failed result too.
  - With O(baselines) (the instances a M(gpufleet.node.service_check) run returned before the load), each
    instance is judged when a passed load ends as M(gpufleet.node.service_check) judges it -
    C(service.health), C(service.models) and C(service.prefix_cache_hit_rate) over the queries since its
    baseline, against O(min_prefix_cache_hit_rate) - and the module fails when one fails.
  - With O(passed_marker), the file is written when every check passed (the gate's "node passed").
  - In check mode nothing is sent and the task is skipped. A burn-in changes no configuration, but it
    puts minutes of load on the node.
options:
  urls:
    description: Base URLs of the instances, e.g. C(http://127.0.0.1:8000).
    type: list
    elements: str
  ports:
    description: Ports of instances on O(host), instead of O(urls).
    type: list
    elements: int
  host:
    description: Host of the instances given by O(ports).
    type: str
    default: 127.0.0.1
  model:
    description: Model id to request; by default each instance's first id from C(/v1/models).
    type: str
  seconds:
    description:
      - How long to load the instances. Three minutes is long enough for the dies and HBM to reach their
        steady temperature (tens of seconds) and for a weak loop to show it.
    type: int
    default: 180
  sample_interval:
    description: Seconds between nvidia-smi samples.
    type: float
    default: 1.0
  concurrency:
    description: Requests in flight per instance. A small batch is enough to keep the GPUs busy.
    type: int
    default: 4
  max_tokens:
    description: Tokens generated per request (always all of them, with vLLM's C(ignore_eos)).
    type: int
    default: 64
  prompt:
    description: Prompt of every request; the default is a fixed paragraph.
    type: str
  request_timeout:
    description: Seconds to wait for one completion.
    type: int
    default: 120
  max_failed_requests:
    description: Failed requests tolerated per instance before the burn-in fails.
    type: int
    default: 0
  gpus:
    description:
      - UUIDs of the GPUs to watch; all GPUs nvidia-smi lists by default.
      - A listed GPU missing from a sample is a bad sample.
    type: list
    elements: str
    default: []
  max_gpu_temp_c:
    description:
      - Highest GPU temperature under load, in degrees C. 83 is a few degrees below where datacenter
        GPUs start thermal slowdown (about 85 to 87).
    type: float
    default: 83.0
  slowdown_margin_c:
    description:
      - When set, each GPU's limit under load is its own slowdown temperature (read once before the load,
        C(nvidia-smi -q -d TEMPERATURE)) less this margin, in degrees C; O(max_gpu_temp_c) is then the
        limit of a GPU that reports none. The check's message names the slowdown temperature and the margin.
      - Null (the default) judges every GPU against O(max_gpu_temp_c) alone. Above 0 and at most 150.
    type: float
  max_memory_temp_c:
    description:
      - Highest HBM temperature under load, in degrees C; HBM3/HBM3e throttle at about 95.
    type: float
    default: 90.0
  min_tlimit_c:
    description:
      - Smallest T.Limit margin (C(temperature.gpu.tlimit)) under load, in degrees C. At 0 the GPU is at its
        max operating temperature and the driver lowers clocks.
    type: float
    default: 3.0
  min_utilization_pct:
    description:
      - When set, each watched GPU must reach this utilization at least once, proving the load reached it.
        Leave unset when some watched GPUs serve no instance.
    type: float
  skip_checks:
    description:
      - Readings not to judge, for a GPU model that never reports them (A100s have no T.Limit). Everything
        else that is missing from a sample still makes it bad.
    type: list
    elements: str
    choices: [gpu_temp_c, memory_temp_c, tlimit_c]
    default: []
  stop_on_first_bad:
    description: End the load at the first bad sample (no point heating a GPU that already throttles).
    type: bool
    default: true
  pcie:
    description:
      - Read every GPU's PCIe link once while the load runs (C(nvidia-smi --query-gpu) with
        C(pcie.link.gen.gpucurrent), C(pcie.link.gen.max), C(pcie.link.width.current), C(pcie.link.width.max))
        and judge its generation and width against their maximum (C(health.pcie_gen[<uuid>]),
        C(health.pcie_width[<uuid>])). A healthy GPU lowers its link at idle; under load it trains up.
    type: bool
    default: true
  health:
    description:
      - Read the node's hardware health again when the load ends and judge it as M(gpufleet.node.node_health)
        does before it, under the same check names - the GPU count (C(health.gpu_count)), uncorrectable ECC
        errors (C(health.ecc_uncorrectable[<uuid>])), row remaps (C(health.row_remap_pending[<uuid>]),
        C(health.row_remap_failure[<uuid>])), every NVLink link (C(health.nvlink[<uuid>])), each GPU's PCIe
        width, its recovery action (C(health.recovery_action[<uuid>])), and the Xid events logged during the
        burn-in (C(health.xid[<bus id>]); the kernel log is read when the load starts and again when it ends).
      - Also each GPU's PCIe replays under the load (C(health.pcie_replays[<uuid>])) - the rise of its
        C(nvidia-smi -q -x) replay counter from the load's start to its end, at most 8 a minute (DCGM's PCIe
        health watch), and its NVLink CRC, replay and recovery errors (C(health.nvlink_errors[<uuid>]),
        C(nvidia-smi nvlink -e) at the load's start and end; DCGM's NVLink watch, CRC 6000 a minute, the
        others 0), and the NVSwitch SXids logged during the load (C(health.sxid[<switch bus id>])). A GPU
        that falls off the bus or counts an uncorrectable
        error under the load fails the burn-in; a read that fails is C(burn_in.health) (fail closed).
      - Needs C(dmesg) (root, kernel.dmesg_restrict).
    type: bool
    default: true
  expected_gpu_count:
    description: With O(health), how many GPUs the node's profile has; unset, not judged.
    type: int
  nvlink:
    description: With O(health), the profile's GPUs are joined by NVLink - every link must be active.
    type: bool
    default: true
  max_volatile_uncorrectable_ecc:
    description: With O(health), most uncorrectable ECC errors since the driver loaded a GPU may have.
    type: int
    default: 0
  max_aggregate_uncorrectable_ecc:
    description: With O(health), most lifetime uncorrectable ECC errors a GPU may have; unset, not judged.
    type: int
  turned_off:
    description:
      - With O(health), check families not judged, each with the reason the report shows
        (see M(gpufleet.node.node_health)).
    type: dict
    default: {}
  baselines:
    description:
      - The instances to judge when a passed load ends, each a dict with C(name), C(url) and C(prefix_cache)
        (the RV(gpufleet.node.service_check#module:instances) of a run before the load); empty, none.
    type: list
    elements: dict
    default: []
  min_prefix_cache_hit_rate:
    description: With O(baselines), the floor of each instance's prefix-cache hit rate, 0..1.
    type: float
    default: 0.5
  passed_marker:
    description:
      - A file written (C(post-maintenance gate passed), mode 0644) when every check passed and it is not
        there yet; the module then reports changed.
    type: path
extends_documentation_fragment:
  - gpufleet.node.nvidia_smi
  - gpufleet.node.roce_window
  - gpufleet.node.roce_window.judge
  - gpufleet.node.clock_events
  - gpufleet.node.attributes
attributes:
  check_mode:
    support: partial
    details: Skipped in check mode (nothing sent, no checks); a burn-in has nothing to predict.
  diff_mode:
    support: none
notes:
  - Runs on the node, against instances listening there, with the same HTTP client as
    M(gpufleet.node.service_check) (Ansible's open_url).
  - A driver without C(temperature.gpu.tlimit) (before R525) fails the first sample.
  - With O(roce_ports) on a node that has RoCE ports, C(ethtool) must be installed (else set
    O(roce_ports=false)).
seealso:
  - module: gpufleet.node.thermal_gate
  - module: gpufleet.node.service_check
author:
  - gpufleet developers (!UNKNOWN)
"""

EXAMPLES = r"""
# post_maintenance order: ... gate -> start instances -> wait healthy -> burn-in (here) -> prefix cache
# -> mark passed -> undrain.
- name: Three minutes of small-batch load on both instances, watching every GPU
  gpufleet.node.burn_in:
    ports: "{{ inference_service_instances | map(attribute='port') | list }}"
    seconds: "{{ thermal_gate_burn_in_seconds }}"
    max_gpu_temp_c: "{{ thermal_gate_burn_in_max_gpu_temp_c }}"
    max_memory_temp_c: "{{ thermal_gate_burn_in_max_memory_temp_c }}"
    min_tlimit_c: "{{ thermal_gate_burn_in_min_tlimit_c }}"
  register: burn_in

- name: A failed burn-in leaves the instances stopped
  ansible.builtin.systemd_service:
    name: "vllm-{{ item.name }}.service"
    state: stopped
  loop: "{{ inference_service_instances }}"
  loop_control:
    label: "{{ item.name }}"
  when: burn_in is failed

- name: A quick one on a single instance
  gpufleet.node.burn_in:
    urls: [http://127.0.0.1:8000]
    seconds: 30
    concurrency: 2
"""

RETURN = r"""
# changes (always empty) and the type of checks: the no_changes and checks fragments
extends_documentation_fragment: [gpufleet.node.no_changes, gpufleet.node.checks]
ansible_facts:
  description: C(gpufleet_burn_in), every sample over time, kept for the report's charts (also when it fails).
  returned: when the burn-in ran
  type: dict
  contains:
    gpufleet_burn_in:
      description:
        - C(interval_s), C(duration_s), C(limits) (C(max_gpu_temp_c), C(max_memory_temp_c),
          C(min_tlimit_c)) and per GPU C(uuid), C(index), C(t) (seconds into the burn-in), C(gpu_c),
          C(memory_c), C(sm_mhz), C(power_w) (one value per sample, null where the sample lacked it) and
          C(events) (C(t) and the active clock event reasons other than gpu_idle).
      type: dict
checks:
  description:
    - C(burn_in.samples); per watched GPU the thermal judge's checks of M(gpufleet.node.thermal_gate),
      under the same names - C(thermal.gpu_temp_c[<uuid>]) (peak), C(thermal.memory_temp_c[<uuid>]) (peak),
      C(thermal.tlimit_c[<uuid>]) (lowest margin), C(thermal.clocks_event_reasons[<uuid>]) (forbidden
      reasons seen);
      C(burn_in.utilization_pct[<uuid>]) (with O(min_utilization_pct)),
      C(burn_in.gpu_present[<uuid>]) (when it went missing); per instance C(burn_in.requests[<url>]);
      with O(roce_ports), per RoCE port the checks of M(gpufleet.node.roce_health)
      (C(fabric.retransmits[<dev>]), C(fabric.pause_duration[<dev>]), ...), or C(burn_in.roce_counters)
      when the counters could not be read; with O(health), the node's health when the load ended
      (C(health.*), see O(health)), or C(burn_in.health) when it could not be read.
  sample:
    - {"name": "thermal.clocks_event_reasons[GPU-3f5c1e2a-0d4b-5e6f-8a9b-0c1d2e3f4a5b]", "ok": false,
       "value": ["sw_thermal_slowdown"], "limit": [], "unit": "",
       "message": "GPU GPU-3f5c... throttled under load: sw_thermal_slowdown"}
first_bad_sample:
  description:
    - The first bad sample - C(t) seconds into the burn-in, the GPU, the C(reading) (C(temperature.gpu),
      C(temperature.memory), C(temperature.gpu.tlimit), C(clocks_event_reasons), C(uuid) for a missing GPU,
      C(nvidia-smi) for a failed sample), its value and the limit. Null when every sample was good.
  returned: always
  type: dict
  sample: {"t": 47.0, "uuid": "GPU-3f5c1e2a-0d4b-5e6f-8a9b-0c1d2e3f4a5b", "reading": "temperature.gpu.tlimit",
           "value": 2, "limit": 3.0}
samples:
  description: Sample count, per GPU its peaks, lowest T.Limit margin and reasons seen, and every reason seen.
  returned: always
  type: dict
  sample:
    count: 180
    reasons_seen: [sw_power_cap]
    error: null
    gpus:
      GPU-3f5c1e2a-0d4b-5e6f-8a9b-0c1d2e3f4a5b:
        index: 0
        max_gpu_c: 65
        max_memory_c: 74
        min_tlimit_c: 20
        max_utilization_pct: 90
        reasons_seen: [sw_power_cap]
        missing: {gpu_c: 0, memory_c: 0, tlimit_c: 0, reasons: 0, gpu: 0}
requests:
  description: Per instance URL, the model requested and the requests sent, answered and failed.
  returned: always
  type: dict
  sample: {"http://127.0.0.1:8000": {"model": "GLM-5.2-NVFP4", "sent": 412, "ok": 408, "failed": 0,
                                      "last_error": null}}
duration_s:
  description: Seconds the load ran.
  returned: always
  type: float
  sample: 180.2
stopped_early:
  description: Whether a bad sample (or a failed nvidia-smi) ended the load before O(seconds).
  returned: always
  type: bool
  sample: false
health_after_load:
  description:
    - With O(health), what was read when the load ended - C(gpu_count), per GPU C(gpus) (its PCIe width,
      pending remap, uncorrectable ECC, active NVLink links), C(xids) (per GPU and Xid the events logged
      during the burn-in) - and C(error), why it could not be read (null when it was). Null with
      O(health=false).
  returned: always
  type: dict
  sample: {"gpu_count": 15, "gpus": [], "xids": [{"pci_bus_id": "0000:9a:00", "xid": 79, "events": 1}],
           "error": null}
roce:
  description:
    - The RoCE ports watched (C(ports)), the seconds between their two readings (C(window_s)), when the links
      were read again at the settling time (C(settled_at_s), null when the load ended first), per port how
      much each judged counter grew (C(deltas)) and why the counters could not be read (C(error)).
      Null with O(roce_ports=false) or on a node without RoCE ports.
  returned: always
  type: dict
  sample: {"ports": [{"ibdev": "mlx5_0", "port": 1, "netdev": "ens21np0"}], "window_s": 180.3,
           "settled_at_s": 30.1, "deltas": {"mlx5_0": {"out_of_sequence": 0, "np_cnp_sent": 53120}},
           "error": null}
"""

import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.node.plugins.module_utils.core.inputs import refuse_bad_input
from ansible_collections.gpufleet.node.plugins.module_utils.core.tool_runner import nvidia_smi, tool_path
from ansible_collections.gpufleet.node.plugins.module_utils.gpu.gpu_readings import thermal_sampler
from ansible_collections.gpufleet.node.plugins.module_utils.node.node_health import (
    OPTIONS_SPEC as HEALTH_SPEC,
)
from ansible_collections.gpufleet.node.plugins.module_utils.node.node_health import (
    AfterLoad,
    read_pcie,
    under_load_checks,
)
from ansible_collections.gpufleet.node.plugins.module_utils.node.node_health import (
    ReadError as HealthReadError,
)
from ansible_collections.gpufleet.node.plugins.module_utils.node.node_health import (
    input_errors as health_input_errors,
)
from ansible_collections.gpufleet.node.plugins.module_utils.rdma.roce_reading import (
    WINDOW_OPTIONS,
    OptionError,
    ReadError,
    window_for,
)
from ansible_collections.gpufleet.node.plugins.module_utils.thermal.burn_in import (
    DEFAULT_LIMITS,
    DEFAULT_PROMPT,
    Load,
    LoadError,
    SampleError,
    Watch,
    checks,
    run,
)
from ansible_collections.gpufleet.node.plugins.module_utils.thermal.slowdown import with_slowdowns
from ansible_collections.gpufleet.node.plugins.module_utils.thermal.thermal_verdict import (
    GPU_SKIPS,
    gpu_limit_spec,
    limit_errors,
    limits_from_params,
)
from ansible_collections.gpufleet.node.plugins.module_utils.vllm.vllm_client import VllmClient
from ansible_collections.gpufleet.node.plugins.module_utils.vllm.vllm_instance import (
    BaselineError,
    judge_instance,
    parse_baseline,
)

# The clock and sleep of the prefix-cache judge (tests replace them).
_monotonic = time.monotonic
_sleep = time.sleep

_LIMITS = ("max_gpu_temp_c", "max_memory_temp_c", "min_tlimit_c", "forbidden_reasons", "min_utilization_pct")


def _validate(module):
    p = module.params
    if p["seconds"] < 1 or p["sample_interval"] <= 0 or p["concurrency"] < 1 or p["max_tokens"] < 1:
        module.fail_json(
            msg="seconds, concurrency and max_tokens must be 1 or more and sample_interval above 0"
        )
    if p["request_timeout"] < 1 or p["max_failed_requests"] < 0:
        module.fail_json(msg="request_timeout must be 1 s or more and max_failed_requests 0 or more")
    urls = p["urls"] if p["urls"] else ["http://%s:%d" % (p["host"], port) for port in p["ports"]]
    if not urls:
        module.fail_json(msg="no instance to load: give urls or ports of the node's vLLM instances")
    bad = [u for u in urls if not u.startswith(("http://", "https://"))]
    if bad:
        module.fail_json(
            msg="urls must be http(s) base URLs such as http://127.0.0.1:8000, not %s" % ", ".join(bad)
        )
    return urls


def _pcie_sampler(module, smi):
    """The PCIe links read once while the load runs: ``{gpus, error}``."""

    def sample():
        try:
            return {"gpus": read_pcie(module.run_command, smi), "error": None}
        except HealthReadError as exc:
            return {"gpus": None, "error": str(exc)}

    return sample


def _roce_window(module):
    """The counters to read around the load: a roce_reading.Window over the node's RoCE ports, or
    None (roce_ports off, or no RoCE port on the node)."""
    try:
        return window_for(
            module.run_command,
            module.params,
            lambda: tool_path(module, "ethtool"),
            name="burn_in.roce_counters",
            during="during the burn-in",
        )
    except OptionError as exc:
        module.fail_json(msg=str(exc))
    except ReadError as exc:
        module.fail_json(msg="%s; check the RDMA devices' sysfs, or set roce_ports: false" % exc)


# What to check before admitting traffic, by the failed check's name (first match; the rest: cooling).
_ADVICE = (
    (
        ("fabric.", "burn_in.roce_counters"),
        "check the RoCE path (host and switch PFC, ECN, DSCP map and MTU)",
    ),
    (("health.", "burn_in.health", "burn_in.gpu_present"), "have the GPUs the health checks name serviced"),
)
_COOLING = "check the coolant loop"


def _advice(failed):
    """What to check before admitting traffic, by what failed: the hardware, the RoCE path, the
    coolant loop."""
    todo = []
    for c in failed:
        found = next((what for prefixes, what in _ADVICE if c["name"].startswith(prefixes)), _COOLING)
        if found not in todo:
            todo.append(found)
    return "Keep the instances stopped and %s before admitting traffic" % " and ".join(todo)


def _after_load(module, smi):
    """The node's health read again when the load ends (node_health.AfterLoad), or None (health off)."""
    p = module.params
    if not p["health"]:
        return None
    refuse_bad_input(
        module, "judge the node's health after the burn-in", health_input_errors(p, "thermal_gate_health_")
    )
    return AfterLoad(
        module.run_command,
        smi,
        tool_path(module, "dmesg"),
        {key: p[key] for key in HEALTH_SPEC},
        "burn_in.health",
        "during the burn-in",
    )


def _baselines(module):
    """The instances whose prefix cache is judged when the load ends: ``(name, url, counters)``."""
    p = module.params
    if not 0 <= p["min_prefix_cache_hit_rate"] <= 1:
        module.fail_json(
            msg="min_prefix_cache_hit_rate is %s; a hit rate floor is 0..1 (0.5 by default)"
            % p["min_prefix_cache_hit_rate"]
        )
    taken = []
    for item in p["baselines"]:
        if not isinstance(item, dict) or not item.get("name") or not item.get("url"):
            module.fail_json(
                msg="each of baselines needs the name and url service_check returned, got %r" % (item,)
            )
        try:
            taken.append((str(item["name"]), item["url"], parse_baseline(item.get("prefix_cache"))))
        except BaselineError as exc:
            module.fail_json(msg="%s: %s" % (item["name"], exc))
    return taken


def _judge_instances(module, baselines):
    """Each instance's health, models and prefix-cache hit rate since its baseline (service_check's
    checks, the queries judged the burn-in's)."""
    p = module.params
    checks = []
    for name, url, counters in baselines:
        one = judge_instance(
            VllmClient(url, 10, True),
            name,
            floor=p["min_prefix_cache_hit_rate"],
            baseline=counters,
            # looked up at each call, so a test's patched _monotonic/_sleep is the one used
            monotonic=lambda: _monotonic(),  # pylint: disable=unnecessary-lambda
            sleep=lambda s: _sleep(s),  # pylint: disable=unnecessary-lambda
        )
        checks.extend(one["checks"])
    return checks


def _mark_passed(path):
    """The gate-passed marker, written (its directory created) when it is not there yet; True if written."""
    if os.path.isfile(path):
        return False
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    with open(path, "w", encoding="utf-8") as out:
        out.write("post-maintenance gate passed\n")
    os.chmod(path, 0o644)
    return True


def main():
    module = AnsibleModule(
        argument_spec=dict(
            urls=dict(type="list", elements="str"),
            ports=dict(type="list", elements="int"),
            host=dict(type="str", default="127.0.0.1"),
            model=dict(type="str"),
            seconds=dict(type="int", default=180),
            sample_interval=dict(type="float", default=1.0),
            concurrency=dict(type="int", default=4),
            # A token count, not a secret (validate-modules guesses secrets from names: no-log-needed).
            max_tokens=dict(type="int", default=64, no_log=False),
            prompt=dict(type="str"),
            request_timeout=dict(type="int", default=120),
            max_failed_requests=dict(type="int", default=0),
            gpus=dict(type="list", elements="str", default=[]),
            **gpu_limit_spec(DEFAULT_LIMITS, slowdown=True),
            min_utilization_pct=dict(type="float"),
            skip_checks=dict(type="list", elements="str", choices=list(GPU_SKIPS), default=[]),
            stop_on_first_bad=dict(type="bool", default=True),
            **WINDOW_OPTIONS,
            pcie=dict(type="bool", default=True),
            health=dict(type="bool", default=True),
            **HEALTH_SPEC,
            nvidia_smi_path=dict(type="path"),
            baselines=dict(type="list", elements="dict", default=[]),
            min_prefix_cache_hit_rate=dict(type="float", default=0.5),
            passed_marker=dict(type="path"),
        ),
        mutually_exclusive=[["urls", "ports"]],
        required_one_of=[["urls", "ports"]],
        supports_check_mode=True,
    )
    if module.check_mode:
        module.exit_json(changed=False, skipped=True, msg="check mode: no load sent, nothing sampled")
    p = module.params
    urls = _validate(module)
    baselines = _baselines(module)
    errors = limit_errors(p, "thermal_gate_burn_in_")
    if errors:
        module.fail_json(msg="burn-in limits outside their physical range: %s" % "; ".join(errors))
    smi = nvidia_smi(module, p["nvidia_smi_path"])
    counters = _roce_window(module)
    health = _after_load(module, smi)
    limits = limits_from_params(p, _LIMITS, GPU_SKIPS)
    load = Load(
        urls,
        model=p["model"],
        concurrency=p["concurrency"],
        max_tokens=p["max_tokens"],
        prompt=p["prompt"] or DEFAULT_PROMPT,
        timeout=p["request_timeout"],
    )
    try:
        load.resolve_models()
    except LoadError as exc:
        module.fail_json(msg="%s; the burn-in needs every instance answering" % exc, checks=[], changes=[])
    watch = Watch(limits, p["gpus"])
    result = run(
        with_slowdowns(
            thermal_sampler(module, smi, SampleError, power=True), module, smi, limits["slowdown_margin_c"]
        ),
        load,
        p["seconds"],
        p["sample_interval"],
        watch,
        p["stop_on_first_bad"],
        counters=counters,
        under_load=_pcie_sampler(module, smi) if p["pcie"] else None,
        health=health,
    )
    result["health_after_load"] = result.pop("health")
    pcie = result.pop("under_load") or {}
    result["pcie_under_load"] = pcie.get("gpus")
    # the samples over time, for the report's charts (a failed burn-in's too: the report keeps them)
    result["ansible_facts"] = {
        "gpufleet_burn_in": watch.trace_fact(p["sample_interval"], result["duration_s"])
    }
    result["checks"] = checks(result, limits, p["max_failed_requests"], counters, health)
    if p["pcie"]:
        result["checks"].extend(under_load_checks(pcie.get("gpus"), pcie.get("error")))
    result["changes"] = []
    failed = [c for c in result["checks"] if not c["ok"]]
    if not failed and baselines:
        # the burn-in's queries are the traffic the prefix cache is judged on
        served = _judge_instances(module, baselines)
        result["checks"].extend(served)
        failed = [c for c in served if not c["ok"]]
        if failed:
            module.fail_json(
                msg="after the burn-in: %s" % "; ".join(c["message"] for c in failed), changed=False, **result
            )
    if failed:
        bad = result["first_bad_sample"]
        first = ""
        if bad is not None:
            first = " First bad sample at %ss: %s %s = %s (limit %s)." % (
                bad["t"],
                bad["uuid"] or "node",
                bad["reading"],
                bad["value"],
                bad["limit"],
            )
        module.fail_json(
            msg="burn-in failed after %ss: %s.%s %s"
            % (result["duration_s"], "; ".join(c["message"] for c in failed[:6]), first, _advice(failed)),
            changed=False,
            **result,
        )
    marked = _mark_passed(p["passed_marker"]) if p["passed_marker"] else False
    module.exit_json(
        changed=marked,
        msg="burn-in passed: %d samples over %ss, %d checks"
        % (result["samples"]["count"], result["duration_s"], len(result["checks"])),
        **result,
    )


if __name__ == "__main__":
    main()
