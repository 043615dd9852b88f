#!/usr/bin/python
# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: coolant_facts
short_description: Read coolant flow, supply/return temperatures and leak state from a Redfish BMC
version_added: "0.1.0"
description:
  - Follows links from the BMC's service root C(/redfish/v1) to every
    C(Chassis/<id>/ThermalSubsystem/CoolantConnectors/<id>) (the node's cold-plate loops), to the chassis'
    leak detectors (its C(LeakDetectors) collection, else the deprecated C(ThermalSubsystem/LeakDetection)
    of older firmware) and, when the service has them, to C(ThermalEquipment/CDUs/<id>) with their primary
    and secondary coolant connectors and C(LeakDetection), as DMTF's liquid-cooled server and cooling unit
    mockups shape them.
  - Per connector returns flow (L/min), supply and return temperatures, the supply/return difference
    (computed from the two when the BMC gives no C(DeltaTemperatureCelsius)), C(Status.Health) and the
    leak state of its detectors (or of its chassis' detectors).
  - A reading the BMC does not give is V(null), never V(0), so M(gpufleet.node.thermal_gate) can block
    on a missing flow sensor instead of reading it as no flow.
  - "Uses Ansible's own C(open_url), so nothing needs installing. Run it on the controller
    (C(delegate_to: localhost)): the BMCs sit on the management network, which the nodes often cannot reach."
  - The password and the session token never appear in the result, warnings or error messages.
  - B(Fails closed before anything is sent.) An C(http://) address is refused, as the password would
    cross the network in clear text, unless O(insecure_http_reason) says why it must be so; the reason is
    then reported (a warning and a line of C(hints)). A missing, unreadable or non-PEM O(ca_path) is
    refused at once, naming the file; a local configuration error is not retried.
  - A reading that is not a finite number, too large for a float or outside its physical range (flow
    0..10000 L/min, temperatures -40..150 C, supply/return difference -100..100 K) fails the module
    (kind C(reading)) naming the connector and the property, so the gate never judges it.
  - When the BMC cannot be read the module fails and its result still carries one failed check,
    C(coolant.bmc[<baseuri>]), naming what went wrong, so the fleet report shows it.
options:
  chassis:
    description:
      - Chassis Ids to read (C(1U), C(GPU_Board_0)). Empty reads every chassis that has a C(ThermalSubsystem).
      - A listed chassis the BMC does not have fails the module.
    type: list
    elements: str
    default: []
  cdus:
    description:
      - Also read C(ThermalEquipment/CDUs) when the service has it (a rack CDU's own BMC, or a node BMC
        that mirrors it).
    type: bool
    default: true
extends_documentation_fragment: [gpufleet.node.attributes.facts, gpufleet.node.attributes,
  gpufleet.node.bmc, gpufleet.node.account]
attributes:
  check_mode:
    details: Only reads (a session is still opened and closed).
notes:
  - Redfish sensor excerpts are read from their C(Reading); DMTF's liquid-cooled server mockup has
    no C(FlowLitersPerMinute) on its cold plates, so its flow reads V(null).
  - Connectors whose C(Status.State) is C(Absent) are left out.
seealso:
  - name: DMTF DSP2046 Redfish Resource and Schema Guide
    description: CoolantConnector, CoolingUnit, LeakDetection and ThermalSubsystem resources.
    link: https://www.dmtf.org/dsp/DSP2046
  - module: gpufleet.node.thermal_gate
author:
  - gpufleet developers (!UNKNOWN)
"""

EXAMPLES = r"""
# The post-maintenance order: drain -> topology check -> power -> temperatures and coolant (this module
# and gpu_facts) -> gate -> start instances -> wait healthy -> burn-in -> prefix cache -> mark passed
# -> undrain.
- name: Read the node's coolant loops from its BMC (on the controller, which reaches the management network)
  gpufleet.node.coolant_facts:
    baseuri: "{{ gpufleet_bmc_address }}"
    username: "{{ gpufleet_bmc_username }}"
    password: "{{ gpufleet_bmc_password }}"
    ca_path: "{{ gpufleet_bmc_ca_path | default(omit) }}"
    insecure_http_reason: "{{ gpufleet_bmc_insecure_http_reason | default(omit) }}"
  # password is a no_log option, so it is masked in the result; the readings stay visible.
  delegate_to: localhost

- name: Show flow per connector
  ansible.builtin.debug:
    msg: "{{ item.key }}: {{ item.flow_lpm }} L/min, supply {{ item.supply_c }} C, dT {{ item.delta_c }} K"
  loop: "{{ gpufleet_coolant.connectors }}"
  loop_control:
    label: "{{ item.key }}"

- name: A BMC without Redfish sessions, one chassis only
  gpufleet.node.coolant_facts:
    baseuri: 10.20.1.11:8443
    username: monitor
    password: "{{ vault_bmc_password }}"
    auth: basic
    chassis: [GPU_Baseboard]
    cdus: false
  delegate_to: localhost
"""

RETURN = r"""
extends_documentation_fragment: [gpufleet.node.added_facts, gpufleet.node.checks]
ansible_facts:
  description: Facts added to the host (the node, not the controller the module ran on).
  contains:
    gpufleet_coolant:
      description: What the BMC reported.
      returned: success
      type: complex
      contains:
        service:
          description: The Redfish service read.
          type: dict
          sample: {"baseuri": "https://10.20.1.11", "redfish_version": "1.13.0",
                   "uuid": "92384634-2938-2342-8820-489239905423"}
        connectors:
          description:
            - Every coolant connector of every chassis read, the node's cold-plate loops. C(key) is
              C(<chassis Id>/<connector Id>). Temperatures in degrees C, flow in L/min; each reading is
              null when the BMC does not give it.
          type: list
          elements: dict
          sample:
            - key: 1U/CPU1
              id: CPU1
              name: "CPU #1 Cold Plate"
              uri: /redfish/v1/Chassis/1U/ThermalSubsystem/CoolantConnectors/CPU1
              state: Enabled
              health: OK
              flow_lpm: null
              rated_flow_lpm: 30.0
              supply_c: 14.8
              return_c: 38.2
              delta_c: 23.4
              delta_computed: false
              leak: null
              leak_detectors: []
        chassis:
          description:
            - Per chassis read, its health, leak detectors and connectors (the same dicts as
              RV(ansible_facts.gpufleet_coolant.connectors)).
          type: list
          elements: dict
          sample: [{"id": "1U", "uri": "/redfish/v1/Chassis/1U", "health": "OK", "leak": null,
                    "leak_detectors": [], "connectors": []}]
        cdus:
          description:
            - Per CDU in C(ThermalEquipment/CDUs), its health, the conditions it reports that are not OK,
              its leak detectors and worst leak state, and its connectors (key C(CDU<Id>/primary/<Id>) or
              C(CDU<Id>/secondary/<Id>)).
          type: list
          elements: dict
          sample:
            - id: "1"
              name: "Rack #4 Cooling Distribution Unit"
              uri: /redfish/v1/ThermalEquipment/CDUs/1
              state: Enabled
              health: Warning
              health_rollup: Critical
              conditions: [{"message": "Pump '2' has failed.", "severity": "Critical"}]
              leak: OK
              leak_detectors: [{"name": "Moisture Leak Detector", "state": "OK",
                                "uri": "/redfish/v1/Chassis/CDU/LeakDetectors/Moisture"}]
              connectors: []
checks:
  description:
    - Empty on success. When the BMC could not be read, one failed check C(coolant.bmc[<baseuri>]) whose
      value is the kind of failure (C(auth), C(not_found), C(connection), C(tls), C(http), C(protocol),
      C(reading) for a reading that is not finite or outside its physical range, C(config) for an
      C(http://) address without O(insecure_http_reason) or an unusable O(ca_path)).
  sample: [{"name": "coolant.bmc[https://10.20.1.11]", "ok": false, "value": "auth", "limit": "readings",
            "unit": "", "message": "BMC https://10.20.1.11 rejected the credentials (HTTP 401 ...)"}]
hints:
  description:
    - Lines for the operator; with O(insecure_http_reason) on an C(http://) BMC, the one that says it was
      read over plain HTTP and why. Also given as a warning.
  returned: always
  type: list
  elements: str
  sample: ["BMC http://10.20.1.11 is read over plain HTTP (its password crosses the network in clear
           text), allowed by insecure_http_reason (thermal_gate_bmc_insecure_http_reason): CHG-4711 lab BMC"]
requests:
  description: HTTP requests made, retries included.
  returned: always
  type: int
  sample: 12
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.node.plugins.module_utils.mgmt.coolant_read import ARGUMENT_SPEC, read


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    result, secrets = read(module.params, module.warn)
    # Masked wherever Ansible prints results, should a BMC echo it back in a body.
    module.no_log_values.update(secrets)
    if result.pop("failed", False):
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
