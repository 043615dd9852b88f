#!/usr/bin/python
# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: thermal_gate
short_description: Decide from GPU readings and coolant facts whether a node may start serving (fails closed)
version_added: "0.1.0"
description:
  - Reads every GPU once with one C(nvidia-smi --query-gpu=uuid,index,temperature.gpu,temperature.memory,
    temperature.gpu.tlimit,clocks_event_reasons.active,... --format=csv,noheader,nounits) call (the same
    sample M(gpufleet.node.burn_in) takes under load), judges it and the facts of
    M(gpufleet.node.coolant_facts) (O(coolant)) against limits, and returns one check per reading,
    C(thermal.<reading>[<GPU UUID>]) and C(coolant.<reading>[<connector>]), and a verdict.
  - The GPU checks are the burn-in's, from the same judge under the same names; only the limits
    differ (idle here, under load there).
  - Per GPU - temperature, memory temperature, the T.Limit margin, and
    the active clock event reasons. Per node coolant connector - flow, supply temperature, supply/return
    difference, health and leak state. Per CDU - health (with the conditions it reports) and leak state.
  - B(Fails closed.) A reading that is missing is a failed check, and so is an empty GPU list, missing
    coolant facts or a BMC that lists no coolant connector. A check is turned off only by naming it in
    O(skip_checks) (it is then not listed), for a reading a GPU model or BMC never has.
  - A limit outside its physical range (a negative flow, a temperature above 150 C, NaN) is refused
    before anything is read, naming the option, the role input and the allowed range.
  - When any check fails the verdict is C(blocked) and the module fails, naming the failed checks, so the
    play stops for that host and its instances are not started. With a non-blank O(override_reason) the
    verdict is C(overridden), the module succeeds with a warning, and the reason and the failed checks
    are recorded in the result (C(override)) for the fleet report.
  - Changes nothing; runs on the node (it reads its GPUs).
options:
  coolant:
    description:
      - The C(gpufleet_coolant) fact of M(gpufleet.node.coolant_facts). Missing (V(null)) is a failed check
        unless O(require_coolant) is false.
    type: dict
  require_coolant:
    description:
      - Whether the node must show coolant readings. Set V(false) only for air-cooled nodes; then missing
        coolant facts and an empty connector list are not failures (reported connectors are still judged).
    type: bool
    default: true
  max_gpu_temp_c:
    description:
      - Highest GPU temperature (C(temperature.gpu_c)) allowed, in degrees C. The gate runs on a drained
        node, so this is an idle limit; 60 is far above an idle liquid-cooled GPU (about 30 to 40) and
        below where a GPU without working cooling ends up.
      - 0 to 150; anything else is refused before a GPU is read.
    type: float
    default: 60.0
  slowdown_margin_c:
    description:
      - When set, each GPU's temperature limit is its own slowdown temperature (the temperature at which
        its hardware halves its clocks, read with C(nvidia-smi -q -d TEMPERATURE) as C(GPU Slowdown Temp),
        or the current temperature plus C(GPU T.Limit Temp) less C(GPU Slowdown T.Limit Temp)) less this
        margin, in degrees C; O(max_gpu_temp_c) is then the limit of a GPU that reports none. The check's
        message names the slowdown temperature and the margin.
      - Null (the default) judges every GPU against O(max_gpu_temp_c) alone. Above 0 and at most 150.
    type: float
  max_memory_temp_c:
    description:
      - Highest HBM temperature (C(temperature.memory_c)) allowed at idle, in degrees C, 0 to 150.
    type: float
    default: 70.0
  min_tlimit_c:
    description:
      - Smallest T.Limit margin (C(temperature.tlimit_c)) allowed, in degrees C. T.Limit is the margin to
        the GPU's max operating temperature, so low is bad and 0 means the GPU is at its limit; 20 at idle
        leaves room for the load.
      - Above 0 (0 or less passes a GPU at its limit) and at most 150.
    type: float
    default: 20.0
  min_flow_lpm:
    description:
      - Lowest coolant flow allowed per node connector, in L/min. Size it per profile from the loop's
        design flow (about 1.5 L/min per kW of heat it removes); the default fits a small loop.
      - Above 0 (0 or less passes a loop with no flow) and at most 10000.
    type: float
    default: 10.0
  max_supply_c:
    description:
      - Highest coolant supply temperature allowed per node connector, in degrees C. 35 is an ASHRAE W32
        facility loop with a few degrees of margin; raise it for W40/W45 designs.
      - 0 to 100.
    type: float
    default: 35.0
  max_delta_c:
    description:
      - Largest supply/return difference allowed per node connector, in kelvin. Loops are designed for
        about 10 K at full load; at idle a large difference means the flow is low.
      - 0 to 100.
    type: float
    default: 15.0
  allowed_health:
    description: C(Status.Health) values that pass, for connectors and CDUs.
    type: list
    elements: str
    choices: [OK, Warning, Critical]
    default: [OK]
  require_leak_detection:
    description:
      - Whether every connector and CDU must report a leak detector state. Off by default because many
        node BMCs (DMTF's liquid-cooled server mockup among them) have no leak detectors; a reported state
        other than C(OK) always fails.
    type: bool
    default: false
  skip_checks:
    description:
      - Readings not to judge at all, for a GPU model or BMC that never has them (A100s report no T.Limit,
        some BMCs no supply/return difference). Their checks are then not listed. Everything else that is
        missing still fails.
    type: list
    elements: str
    choices: [gpu_temp_c, memory_temp_c, tlimit_c, flow_lpm, supply_temp_c, delta_temp_c]
    default: []
  override_reason:
    description:
      - Why the gate is overridden (ticket, who, what was checked by hand). A non-blank reason lets a
        blocked node pass as C(overridden); the checks are still listed and the reason is recorded.
    type: str
extends_documentation_fragment: [gpufleet.node.nvidia_smi, gpufleet.node.clock_events,
  gpufleet.node.attributes.read_only, gpufleet.node.attributes]
seealso:
  - module: gpufleet.node.coolant_facts
  - module: gpufleet.node.burn_in
notes:
  - A driver without C(temperature.gpu.tlimit) (before R525) reports no T.Limit margin, which fails
    closed unless C(tlimit_c) is in O(skip_checks).
author:
  - gpufleet developers (!UNKNOWN)
"""

EXAMPLES = r"""
# post_maintenance order: drain -> topology check -> power -> temperatures and coolant -> gate (here)
# -> start instances -> wait healthy -> burn-in -> prefix cache -> mark passed -> undrain.
- name: Read GPU temperatures and throttle reasons
  gpufleet.node.gpu_facts:

- name: Read the coolant loops from the BMC
  gpufleet.node.coolant_facts:
    baseuri: "{{ gpufleet_bmc_address }}"
    username: "{{ gpufleet_bmc_username }}"
    password: "{{ gpufleet_bmc_password }}"
  delegate_to: localhost

- name: Gate the node on temperatures and coolant before any instance starts
  gpufleet.node.thermal_gate:
    coolant: "{{ gpufleet_coolant }}"
    max_gpu_temp_c: "{{ thermal_gate_max_gpu_temp_c }}"
    max_memory_temp_c: "{{ thermal_gate_max_memory_temp_c }}"
    min_tlimit_c: "{{ thermal_gate_min_tlimit_c }}"
    min_flow_lpm: "{{ thermal_gate_min_flow_lpm }}"
    max_supply_c: "{{ thermal_gate_max_supply_c }}"
    max_delta_c: "{{ thermal_gate_max_delta_c }}"
    override_reason: "{{ thermal_gate_override_reason | default(omit) }}"
  register: gate

- name: Create the runtime directory of gpufleet's markers
  ansible.builtin.file:
    path: /run/gpufleet
    state: directory
    mode: "0755"

- name: Let the instances start this boot (their units require this marker; /run is emptied at boot)
  ansible.builtin.file:
    path: /run/gpufleet/thermal-gate-passed
    state: touch
    mode: "0644"
    modification_time: preserve
    access_time: preserve

- name: Start the instances for the burn-in
  ansible.builtin.systemd_service:
    name: "vllm-{{ item.name }}.service"
    state: started
  loop: "{{ inference_service_instances }}"
  loop_control:
    label: "{{ item.name }}"

- name: An air-cooled node without a BMC coolant tree
  gpufleet.node.thermal_gate:
    require_coolant: false
"""

RETURN = r"""
# changes (always empty) and the type of checks: the no_changes and checks fragments
extends_documentation_fragment: [gpufleet.node.no_changes, gpufleet.node.checks]
verdict:
  description: C(pass) (every check passed), C(blocked) (some failed; the module fails) or C(overridden).
  returned: always
  type: str
  sample: blocked
checks:
  description:
    - One per judged reading, C(thermal.gpu_temp_c[<uuid>]), C(thermal.memory_temp_c[<uuid>]),
      C(thermal.tlimit_c[<uuid>]),
      C(thermal.clocks_event_reasons[<uuid>]), C(coolant.flow_lpm[<connector>]),
      C(coolant.supply_temp_c[<connector>]), C(coolant.delta_temp_c[<connector>]),
      C(coolant.health[<connector>]), C(coolant.leak[<connector>]), C(coolant.cdu_health[<cdu>]),
      C(coolant.cdu_leak[<cdu>]); and C(thermal.gpus) (no GPU read), C(coolant.facts) or
      C(coolant.connectors) when those are missing. value is the reading (null when missing), limit the
      limit. M(gpufleet.node.burn_in) reports the same GPU checks under load.
  sample:
    - {"name": "coolant.flow_lpm[1/Board0]", "ok": false, "value": 6.2, "limit": 14.0, "unit": "L/min",
       "message": "coolant connector 1/Board0 flow 6.2 L/min, below the 14 L/min minimum"}
    - {"name": "thermal.gpu_temp_c[GPU-ee7954ec-da95-fd7a-ddfd-c6b32cc2f8aa]", "ok": true, "value": 31,
       "limit": 60.0, "unit": "C", "message": "GPU GPU-ee79... temperature 31 C, within the 60 C limit"}
failed_checks:
  description: Names of the failed checks.
  returned: always
  type: list
  elements: str
  sample: ["coolant.flow_lpm[1/Board0]"]
override:
  description:
    - The override, when O(override_reason) was given - its reason and the checks it let pass; null otherwise.
  returned: always
  type: dict
  sample: {"reason": "CHG-4711: flow meter on loop B replaced, flow verified by hand",
           "failed_checks": ["coolant.flow_lpm[1/Board1]"]}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.node.plugins.module_utils.core.tool_runner import nvidia_smi
from ansible_collections.gpufleet.node.plugins.module_utils.gpu.gpu_readings import (
    ReadError,
    thermal_sampler,
)
from ansible_collections.gpufleet.node.plugins.module_utils.thermal.slowdown import with_slowdowns
from ansible_collections.gpufleet.node.plugins.module_utils.thermal.thermal_verdict import (
    COOLANT_SKIPS,
    DEFAULT_LIMITS,
    GPU_SKIPS,
    evaluate,
    gpu_limit_spec,
    limit_errors,
    limits_from_params,
)

_SKIP = dict(GPU_SKIPS, **COOLANT_SKIPS)
_LIMITS = (
    "max_gpu_temp_c",
    "max_memory_temp_c",
    "min_tlimit_c",
    "min_flow_lpm",
    "max_supply_c",
    "max_delta_c",
    "forbidden_reasons",
    "allowed_health",
    "require_leak_detection",
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            coolant=dict(type="dict"),
            require_coolant=dict(type="bool", default=True),
            **gpu_limit_spec(DEFAULT_LIMITS, slowdown=True),
            min_flow_lpm=dict(type="float", default=DEFAULT_LIMITS["min_flow_lpm"]),
            max_supply_c=dict(type="float", default=DEFAULT_LIMITS["max_supply_c"]),
            max_delta_c=dict(type="float", default=DEFAULT_LIMITS["max_delta_c"]),
            allowed_health=dict(
                type="list", elements="str", choices=["OK", "Warning", "Critical"], default=["OK"]
            ),
            require_leak_detection=dict(type="bool", default=False),
            skip_checks=dict(type="list", elements="str", choices=list(_SKIP), default=[]),
            nvidia_smi_path=dict(type="path"),
            override_reason=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    errors = limit_errors(p, "thermal_gate_")
    if errors:
        module.fail_json(
            msg="thermal gate limits outside their physical range: %s" % "; ".join(errors),
            verdict="blocked",
            checks=[],
            failed_checks=[],
            override=None,
            changes=[],
        )
    limits = limits_from_params(p, _LIMITS, _SKIP)
    error = None
    try:
        smi = nvidia_smi(module, p["nvidia_smi_path"])
        readings = with_slowdowns(thermal_sampler(module, smi), module, smi, limits["slowdown_margin_c"])()
    except ReadError as exc:
        readings, error = [], str(exc)
    result = evaluate(
        readings,
        p["coolant"],
        limits=limits,
        require_coolant=p["require_coolant"],
        override_reason=p["override_reason"],
        read_error=error,
    )
    failed = [c for c in result["checks"] if not c["ok"]]
    out = dict(
        changed=False,
        verdict=result["verdict"],
        checks=result["checks"],
        failed_checks=result["failed_checks"],
        override=result["override"],
        changes=[],
    )
    if result["verdict"] == "blocked":
        shown = "; ".join(c["message"] for c in failed[:8])
        more = " (and %d more)" % (len(failed) - 8) if len(failed) > 8 else ""
        module.fail_json(
            msg="thermal gate blocked %d of %d checks: %s%s. Fix the cooling or the GPU before starting the "
            "instances, or set override_reason with why it is safe"
            % (len(failed), len(result["checks"]), shown, more),
            **out,
        )
    if result["verdict"] == "overridden":
        module.warn(
            "thermal gate overridden (%s); failed checks let pass: %s"
            % (result["override"]["reason"], ", ".join(result["failed_checks"]))
        )
    module.exit_json(msg="thermal gate %s: %d checks" % (result["verdict"], len(result["checks"])), **out)


if __name__ == "__main__":
    main()
