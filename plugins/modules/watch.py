#!/usr/bin/python
# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: watch
short_description: Look at a node in service over a short window - power caps, throttling, RoCE, vLLM
version_added: "0.1.0"
description:
  - One read-only look at a serving node over O(window_s) seconds, safe while it serves - no load
    generated, nothing restarted or written.
  - The GPUs - one C(nvidia-smi --query-gpu) sample every O(sample_interval_s) from the start of the window
    to its end (temperatures, T.Limit margin, clock event reasons, power draw, requested and enforced power
    limit, and the clock event reason counters, which show a reason that came and went between samples and
    how long the power cap held the clocks). C(gpu_power.enforced_limit_w[<uuid>]) fails when the GPU
    enforced less than its requested limit in any sample, naming the rack's power budget (a PDU protection
    or power brake) as the likely cause; a cap that lasts longer than the largest span between two reads
    (C(sample_gap_s), in its message and the reading) falls on a sample wherever it is in the window, and
    C(watch.gpu_sample_gap) fails when that span exceeds O(max_sample_gap_s).
    C(thermal.gpu_temp_c[<uuid>]), C(thermal.memory_temp_c[<uuid>]), C(thermal.tlimit_c[<uuid>]) and
    C(thermal.clocks_event_reasons[<uuid>]) judge the window's peaks with the burn-in's limits.
  - The RoCE ports - their counters (C(ethtool -S), sysfs C(hw_counters)) and links (sysfs state, rate,
    C(carrier_down_count)) at the start and the end, judged as the burn-in judges them
    (C(fabric.retransmits[<dev>]), C(fabric.pause_duration[<dev>]), ..., C(rdma_link.link_state[<dev>]),
    C(fabric.link_rate[<dev>]), C(fabric.link_flaps[<dev>]), C(fabric.traffic[<dev>])) - a port that went
    down while serving fails even though its counters read zero on zero traffic.
  - Each vLLM instance in O(instances) - C(/health) (C(service.health[<name>])) and C(/metrics) at the start
    and the end - the prefix-cache hit rate of the queries served in the window
    (C(service.prefix_cache_hit_rate[<name>]), not judged when the instance served nothing), generation
    tokens/s, requests running and waiting, preemptions/s and KV-cache usage, under vLLM's old and new
    metric names.
  - What a watch that acts (C(gpufleet watch --act)) decides from, two small file reads before the window -
    the node's remediation history (O(history_path), the reading's C(history); C(guardian.replace_hardware)
    fails while the node is marked "replace hardware", judged with the health checks, or alone when
    O(health) is off) and the drain role's record (O(drain_record_path), the reading's C(drain_record)).
  - Never fails for what it finds - a failed check is the report's; it fails only for bad options.
    The readings are returned as the fact C(gpufleet_watch), which gpufleet.prom publishes.
options:
  window_s:
    description:
      - Seconds the look lasts, 1..300. Five seconds holds enough tokens and RoCE packets for rates and,
        sampled every second, sees a power cap that comes and goes in 10-second waves wherever its capped
        half falls.
    type: float
    default: 5
  sample_interval_s:
    description:
      - Seconds between the GPUs' samples, 0.2..60; a read that takes longer is followed at once by the
        next. One query of a node's GPUs takes about 35 ms on a real H200 node.
    type: float
    default: 1
  max_sample_gap_s:
    description:
      - The shortest power cap the watch must see, in seconds, 1..300 and more than O(sample_interval_s).
        C(watch.gpu_sample_gap) fails (closed) when two GPU samples' reads were further apart than this (a
        node whose nvidia-smi takes seconds to answer), since a cap that long could have fallen between
        them. The default is the capped phase of the PDU protection the watch was made for (5 s of 10 s).
    type: float
    default: 5
  instances:
    description:
      - The node's vLLM instances, as inference_service_instances gives them (C(name) and C(port) are read).
    type: list
    elements: dict
    default: []
  instance_host:
    description: Address the instances answer on, as seen from the node itself.
    type: str
    default: 127.0.0.1
  min_prefix_cache_hit_rate:
    description:
      - Floor for the prefix-cache hit rate over the window's queries, 0..1. The default sits between a
        chat deployment's steady state (about 0.9) and what a prompt template that varies the prefix leaves
        (about 0.07).
    type: float
    default: 0.5
  max_gpu_temp_c:
    description: Highest GPU temperature in service (the burn-in's limit under load).
    type: float
    default: 83
  max_memory_temp_c:
    description: Highest HBM temperature in service.
    type: float
    default: 90
  min_tlimit_c:
    description: Smallest margin to the GPU's slowdown temperature (T.Limit) in service.
    type: float
    default: 3
  health:
    description:
      - Also judge the hardware's health as the gate does (M(gpufleet.node.node_health)'s checks, from one
        C(nvidia-smi -q -x), C(nvidia-smi nvlink -s) and C(dmesg)) - a GPU that fell off the bus, a row remap
        pending, uncorrectable ECC errors, an NVLink link down, a GPU Recovery Action other than None
        (C(health.recovery_action[<uuid>])), Xid events since boot; and each GPU's PCIe replays over the
        window (C(health.pcie_replays[<uuid>]), C(nvidia-smi -q -x) read again when the window opens; at most
        8 a minute, a minute's worth in a shorter window).
      - The NVSwitch fabric as the gate judges it - each GPU's fabric registration
        (C(health.fabric_manager[<uuid>])), NVSwitch SXids since boot (C(health.sxid[<switch bus id>])),
        and with NVLink each GPU's NVLink CRC, replay and recovery errors over the window
        (C(health.nvlink_errors[<uuid>]), C(nvidia-smi nvlink -e) read when it opens and closes; DCGM's
        limits, CRC 6000 a minute, the others 0).
    type: bool
    default: true
  expected_gpu_count:
    description: The profile's GPU count (C(gpufleet_expected_gpu_count)); unset, not judged.
    type: int
  nvlink:
    description: The profile's GPUs are joined by NVLink - every link must be active.
    type: bool
    default: true
  max_volatile_uncorrectable_ecc:
    description: Most uncorrectable ECC errors since the driver loaded a GPU may have.
    type: int
    default: 0
  max_aggregate_uncorrectable_ecc:
    description: Most lifetime uncorrectable ECC errors a GPU may have; unset, not judged.
    type: int
  turned_off:
    description:
      - Health check families not judged, each with the reason the report shows
        (see M(gpufleet.node.node_health)).
    type: dict
    default: {}
  drain_record_path:
    description:
      - The drain role's record on the node (its C(drain_record_path)) - present while gpufleet keeps the node
        out of service. Its text is the reading's C(drain_record) (null when there is none; a record that is
        there but cannot be read says so). Empty, not read.
    type: path
    default: /var/lib/gpufleet/drained
extends_documentation_fragment: [gpufleet.node.nvidia_smi, gpufleet.node.clock_events,
  gpufleet.node.roce_window.judge, gpufleet.node.remediation_history, gpufleet.node.attributes.read_only,
  gpufleet.node.attributes]
notes:
  - The module sleeps O(window_s) seconds. Every tool runs with C(LC_ALL=C).
  - Clock event reason counters need driver R535 or later; without them only the samples are judged.
seealso:
  - module: gpufleet.node.roce_health
  - module: gpufleet.node.service_check
  - module: gpufleet.node.burn_in
author:
  - gpufleet developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Look at the node in service for five seconds
  gpufleet.node.watch:
    instances: "{{ inference_service_instances }}"
    instance_host: "{{ ansible_host }}"
"""

RETURN = r"""
# changes (always empty) and the type of checks: the no_changes and checks fragments
extends_documentation_fragment: [gpufleet.node.no_changes, gpufleet.node.checks]
checks:
  description:
    - Per GPU C(gpu_power.enforced_limit_w[<uuid>]) and the C(thermal.*[<uuid>]) checks; per RoCE port the
      C(fabric.*[<dev>]) checks; per instance C(service.health[<name>]) and
      C(service.prefix_cache_hit_rate[<name>]). C(watch.gpus) or C(watch.roce_counters) fails when a tool
      could not be read, C(watch.gpu_sample_gap) when the GPUs' samples were further apart than
      O(max_sample_gap_s) (fail closed).
  sample:
    - {"name": "gpu_power.enforced_limit_w[GPU-5d3f…]", "ok": false, "value": 1100.0, "limit": 1400.0,
       "unit": "W", "message": "GPU-5d3f… enforces 1100 W, below the requested 1400 W, in 3 of 6 samples over
       5.2 s; power-capped 2.6 s of 5.2 s: the rack's power budget (a PDU protection or power brake) is
       capping it (check the rack's PDU before raising limits)"}
ansible_facts:
  description: C(gpufleet_watch), the window's readings (what gpufleet.prom publishes).
  returned: always
  type: dict
  contains:
    gpufleet_watch:
      description:
        - C(window_s); C(gpu_samples) (the GPU samples taken) and C(sample_gap_s) (the largest span between
          two of their reads, null for fewer than two); C(gpus) (C(index), C(uuid), C(power_limit_w)
          requested/enforced (the lowest seen), C(power_draw_w), C(temperature_c) gpu/memory (peaks),
          C(tlimit_c), C(throttle_active) per reason 0/1, C(throttle_seconds_total) per reason); C(ports)
          (C(ibdev), C(link_up) 0/1, C(rate_gbps), C(link_down_events), C(retransmits_per_second),
          C(pause_seconds_per_second) per priority, C(rx_discards_per_second), C(cnp_sent_per_second),
          C(ecn_marked_per_second)); C(instances) (C(name), C(up), C(prefix_cache_hit_ratio),
          C(generation_tokens_per_second), C(requests_running), C(requests_waiting),
          C(preemptions_per_second), C(kv_cache_usage_ratio)); C(history) (the node's remediation history,
          oldest first - C(time), C(class), C(action), C(outcome), C(checks), C(detail), C(run) - null when it
          could not be read, when C(guardian.replace_hardware) fails closed); C(drain_record) (the text of
          the drain role's record, null when the node has none). A reading that could not be taken is null.
      type: dict
"""

import math

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.node.plugins.module_utils.core.inputs import refuse_bad_input
from ansible_collections.gpufleet.node.plugins.module_utils.core.tool_runner import nvidia_smi, tool_path
from ansible_collections.gpufleet.node.plugins.module_utils.node import remediation_history
from ansible_collections.gpufleet.node.plugins.module_utils.node.node_health import (
    OPTIONS_SPEC as HEALTH_SPEC,
)
from ansible_collections.gpufleet.node.plugins.module_utils.node.node_health import (
    input_errors as health_input_errors,
)
from ansible_collections.gpufleet.node.plugins.module_utils.node.node_health import limits_from
from ansible_collections.gpufleet.node.plugins.module_utils.node.watch import (
    DEFAULT_DRAIN_RECORD_PATH,
    DEFAULT_MAX_SAMPLE_GAP_S,
    DEFAULT_SAMPLE_INTERVAL_S,
    MAX_SAMPLE_GAP_RANGE,
    SAMPLE_INTERVAL_RANGE,
    WINDOW_RANGE,
    InstanceWatch,
    Watch,
)
from ansible_collections.gpufleet.node.plugins.module_utils.rdma.roce_reading import (
    JUDGE_OPTIONS,
    ReadError,
    roce_ports,
    threshold_errors,
    thresholds_from,
)
from ansible_collections.gpufleet.node.plugins.module_utils.thermal.thermal_verdict import (
    LOAD_LIMITS,
    gpu_limit_spec,
    limit_errors,
)

_LIMIT_KEYS = ("max_gpu_temp_c", "max_memory_temp_c", "min_tlimit_c", "forbidden_reasons")


def _input_errors(p):
    """Every bad option, named with its role input (watch_<option>) and the allowed range."""
    low, high = WINDOW_RANGE
    errors = []
    if not (math.isfinite(p["window_s"]) and low <= p["window_s"] <= high):
        errors.append("window_s (watch_window_s) must be %g..%g seconds, got %s" % (low, high, p["window_s"]))
    low, high = SAMPLE_INTERVAL_RANGE
    interval, gap = p["sample_interval_s"], p["max_sample_gap_s"]
    if not (math.isfinite(interval) and low <= interval <= high):
        errors.append(
            "sample_interval_s (watch_sample_interval_s) must be %g..%g seconds, got %s"
            % (low, high, interval)
        )
    low, high = MAX_SAMPLE_GAP_RANGE
    if not (math.isfinite(gap) and low <= gap <= high):
        errors.append(
            "max_sample_gap_s (watch_max_sample_gap_s) must be %g..%g seconds, got %s" % (low, high, gap)
        )
    elif math.isfinite(interval) and gap <= interval:
        errors.append(
            "max_sample_gap_s (watch_max_sample_gap_s) must be more than sample_interval_s "
            "(watch_sample_interval_s, %s): two samples are that far apart at least, got %s" % (interval, gap)
        )
    floor = p["min_prefix_cache_hit_rate"]
    if not (math.isfinite(floor) and 0 <= floor <= 1):
        errors.append(
            "min_prefix_cache_hit_rate (watch_min_prefix_cache_hit_rate) must be 0..1, got %s" % floor
        )
    if not 0 <= p["roce_priority"] <= 7:
        errors.append("roce_priority (watch_roce_priority) must be 0..7, got %s" % p["roce_priority"])
    errors.extend(limit_errors(p, "watch_"))
    errors.extend(health_input_errors(p, "watch_health_"))
    errors.extend("roce_thresholds: %s" % e for e in threshold_errors(thresholds_from(p["roce_thresholds"])))
    names = []
    for i, instance in enumerate(p["instances"]):
        port = instance.get("port") if isinstance(instance, dict) else None
        name = instance.get("name") if isinstance(instance, dict) else None
        if not name or not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
            errors.append(
                "instances[%d] (watch_instances) needs a name and a port 1..65535, got %r" % (i, instance)
            )
        elif name in names:
            errors.append("instances[%d] (watch_instances): the name %s is there twice" % (i, name))
        names.append(name)
    return errors


def _health_options(module):
    """node_health's options for the watch (dmesg must be installed: the Xid events are read)."""
    p = module.params
    return {
        "expected_gpu_count": p["expected_gpu_count"],
        "nvlink": p["nvlink"],
        "dmesg": tool_path(module, "dmesg"),
        "limits": limits_from(p),
        "turned_off": p["turned_off"],
    }


def main():
    module = AnsibleModule(
        argument_spec=dict(
            window_s=dict(type="float", default=5),
            sample_interval_s=dict(type="float", default=DEFAULT_SAMPLE_INTERVAL_S),
            max_sample_gap_s=dict(type="float", default=DEFAULT_MAX_SAMPLE_GAP_S),
            instances=dict(type="list", elements="dict", default=[]),
            instance_host=dict(type="str", default="127.0.0.1"),
            min_prefix_cache_hit_rate=dict(type="float", default=0.5),
            **JUDGE_OPTIONS,
            health=dict(type="bool", default=True),
            nvidia_smi_path=dict(type="path"),
            **HEALTH_SPEC,
            **remediation_history.OPTIONS_SPEC,
            drain_record_path=dict(type="path", default=DEFAULT_DRAIN_RECORD_PATH),
            **gpu_limit_spec(LOAD_LIMITS),
        ),
        supports_check_mode=True,
    )
    p = module.params
    refuse_bad_input(module, "watch", _input_errors(p))
    result = dict(changed=False, checks=[], changes=[])
    smi = nvidia_smi(module, p["nvidia_smi_path"])
    try:
        ports = roce_ports()
    except ReadError as exc:
        module.fail_json(msg="%s; check the RDMA devices' sysfs" % exc, **result)
    ethtool = tool_path(module, "ethtool", required=bool(ports))
    floor = p["min_prefix_cache_hit_rate"]
    host = p["instance_host"]
    instances = [InstanceWatch(i["name"], "http://%s:%d" % (host, i["port"]), floor) for i in p["instances"]]
    limits = {key: p[key] for key in _LIMIT_KEYS}
    watch = Watch(
        module.run_command,
        smi,
        p["window_s"],
        limits,
        ports,
        instances,
        ethtool=ethtool or "ethtool",
        priority=p["roce_priority"],
        thresholds=thresholds_from(p["roce_thresholds"]),
        peers={str(k): str(v) for k, v in p["roce_cabling"].items()},
        health=_health_options(module) if p["health"] else None,
        sample_interval_s=p["sample_interval_s"],
        max_sample_gap_s=p["max_sample_gap_s"],
        history_path=p["history_path"] or None,
        drain_record_path=p["drain_record_path"] or None,
        node_name=p["node_name"],
    )
    checks, fact = watch.run()
    failed = [c for c in checks if not c["ok"]]
    result.update(checks=checks, ansible_facts={"gpufleet_watch": fact})
    if failed:
        names = ", ".join(c["name"] for c in failed)
        msg = "%d of %d checks failed over %ss: %s" % (len(failed), len(checks), fact["window_s"], names)
    else:
        msg = "%d checks passed over %ss" % (len(checks), fact["window_s"])
    module.exit_json(msg=msg, **result)


if __name__ == "__main__":
    main()
