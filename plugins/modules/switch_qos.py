#!/usr/bin/python
# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Apply (or, in check mode, compare) the lossless RoCE profile on a Cumulus Linux leaf over NVUE; read a
SONiC leaf (the action plugin), never change it."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: switch_qos
short_description: The lossless RoCE profile of a leaf switch (Cumulus Linux over NVUE; SONiC read only)
version_added: "0.1.0"
description:
  - Compares the leaf's applied configuration with the profile the hosts' RoCE traffic needs and, unless
    in check mode, applies what differs through one NVUE revision (create, patch, apply) and reads the
    switch again.
  - "The profile: trust PCP and DSCP (V(both), as Cumulus' own RoCE profile); the RoCE DSCP
    (O(roce_dscp), 26 for ToS 106) on the RoCE priority with PFC receiving and sending pauses; the
    CNP DSCP on a priority of its own; each priority in its traffic class; ECN marking on the RoCE
    traffic class; the front-panel ports' MTU."
  - Returns C(reading), the operational QoS tree and every front-panel port's MTU, read once; the nodes'
    C(fabric) role judges each host port's link against it.
  - Runs on the controller (C(connection=local) or C(delegate_to=localhost)), as the switches sit on the
    management network.
  - B(Fails closed before anything is sent.) An C(http://) address is refused unless
    O(insecure_http_reason) says why; a missing or non-PEM O(ca_path) is refused naming the file; a
    certificate the CA did not sign fails and is never retried. The password never appears in the
    result or a message.
  - B(Leaves nothing behind.) A revision it made and did not apply (a PATCH the switch refused or failed,
    a request past its deadline, a failed apply, SIGINT or SIGTERM during the change) is deleted; an
    apply under way when a signal comes is waited for (4 s at most) and its revision and state are
    named in the failure. Every request has a deadline on all of it (O(timeout)) and an answer is at
    most 8 MiB. The action plugin sends the arguments (the password) to the module on a pipe, never in
    a file under C(~/.ansible/tmp).
  - A port in O(ports) that the switch does not have is an input error, found in the plan's read,
    before a revision is made.
  - "B(SONiC leaves, read only.) With O(os=sonic) the action plugin runs C(sonic-cfggen -d --print-data)
    over the leaf's own Ansible connection (SSH: C(ansible_connection=ssh), C(ansible_host),
    C(ansible_user); no module is copied to the switch, no password sent) and reads its CONFIG_DB on the
    controller. The reading has the Cumulus leaves' shape (each port's DSCP_TO_TC_MAP, C(pfc_enable),
    TC_TO_QUEUE_MAP, its RoCE queue's WRED ECN mode and MTU in NVUE's terms, per port where ports differ),
    so the nodes judge it with the same checks. C(changes) are the CONFIG_DB settings that differ from the
    profile (C(PORT_QOS_MAP|Ethernet0 pfc_enable)); a run that is not check mode fails naming them when
    there are any (gpufleet never changes a SONiC leaf) and passes when there are none. A leaf that cannot
    be read gives a failed C(switch.sonic[<name>]) check and C(reading.read=false), as an NVUE one does."
  - A switch that cannot be read is not a module failure in check mode (drift, the gate's read); the
    result has a failed C(switch.nvue[<name>]) check and C(reading.read=false), so every node cabled to
    the switch names it. When applying, it fails the task.
options:
  name:
    description: How checks and readings name the switch (its inventory name); the address's host by default.
    type: str
  os:
    description:
      - The leaf's network OS (the inventory's C(gpufleet_switch_os)), one of C(cumulus) (read and configured
        through NVUE's REST API) or C(sonic) (read over SSH with C(sonic-cfggen -d --print-data), never
        changed). Another value is an input error naming C(gpufleet_switch_os) and the allowed values.
    type: str
    default: cumulus
  address:
    description: The switch's NVUE API, C(host), C(host:port) or C(https://host[:port]) (default port 8765).
      Required with O(os=cumulus); unused with O(os=sonic) (the leaf's Ansible connection is used).
    type: str
  username:
    description: NVUE account (one of the C(nvapply) role to apply; read-only to compare). Required with
      O(os=cumulus).
    type: str
  password:
    description: Password of O(username). Keep it in a vault. Required with O(os=cumulus).
    type: str
  ca_path:
    description: PEM file of the CA that signed the switches' certificates, in addition to the system's.
    type: path
  validate_certs:
    description: Verify the switch's certificate (point O(ca_path) at the switches' CA instead of off).
    type: bool
    default: true
  insecure_http_reason:
    description: Why this switch may be reached over plain C(http://) (reported as a hint). Unset refuses C(http://).
    type: str
  timeout:
    description: Seconds each request may take in all (connect, send, the whole answer), 1 to 600; a switch
      that has not answered in full by then is not read (not asked again).
    type: int
    default: 10
  roce_dscp:
    description: DSCP of the hosts' RoCE traffic, 0..63 (ToS 106 is DSCP 26).
    type: int
    default: 26
  cnp_dscp:
    description: DSCP of the hosts' congestion notification packets, 0..63.
    type: int
    default: 48
  roce_priority:
    description: Switch priority 0..7 of RoCE traffic, the one with PFC (the hosts' PFC priority).
    type: int
    default: 3
  cnp_priority:
    description: Switch priority 0..7 of CNPs, not O(roce_priority) (CNPs must not queue behind RoCE).
    type: int
    default: 6
  roce_traffic_class:
    description: Egress traffic class 0..7 of O(roce_priority); it is ECN-marked.
    type: int
    default: 3
  cnp_traffic_class:
    description: Egress traffic class 0..7 of O(cnp_priority).
    type: int
    default: 6
  mtu:
    description: MTU 552..9216 of the front-panel ports; at least the hosts' RoCE MTU.
    type: int
    default: 9216
  ports:
    description: Front-panel ports whose MTU is managed (C(swp1)). Empty means every C(swp) port.
    type: list
    elements: str
    default: []
  manage:
    description: The parts of the profile this module manages; the others are left as they are.
    type: list
    elements: str
    choices: [trust, dscp_map, pfc, ecn, mtu]
    default: [trust, dscp_map, pfc, ecn, mtu]
extends_documentation_fragment: [gpufleet.node.attributes.writes, gpufleet.node.attributes]
attributes:
  check_mode:
    details: Reads the switch and returns the changes it would make; no revision is created.
  diff_mode:
    details: The NVUE settings that differ, before and after.
notes:
  - NVUE's paths and keys follow NVIDIA's Cumulus Linux 5.x user guide (NVUE API, RoCE and QoS pages);
    no public capture of NVUE's JSON exists, so the shapes are those the guide's C(nv show) output shows.
seealso:
  - name: Cumulus Linux RDMA over Converged Ethernet (RoCE)
    description: The lossless RoCE profile and its NVUE commands.
    link: https://docs.nvidia.com/networking-ethernet-software/cumulus-linux/Layer-1-and-Switch-Ports/Quality-of-Service/RDMA-over-Converged-Ethernet-RoCE/
  - module: gpufleet.node.node_facts
author:
  - gpufleet developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Apply the lossless RoCE profile on the leaf (on the controller)
  gpufleet.node.switch_qos:
    address: "{{ gpufleet_switch_address }}"
    username: "{{ gpufleet_switch_username }}"
    password: "{{ gpufleet_switch_password }}"
    ca_path: "{{ gpufleet_switch_ca_path | default(omit) }}"
  delegate_to: localhost
"""

RETURN = r"""
extends_documentation_fragment: [gpufleet.node.checks]
changes:
  description: Each NVUE setting changed (or, in check mode, that would change), as C({setting, from, to}).
  returned: always
  type: list
  elements: dict
checks:
  description: C(switch.nvue[<name>]), whether the switch's NVUE API was read; C(switch.sonic[<name>]) for a
    SONiC leaf, whether its CONFIG_DB was read.
hints:
  description: A plain-HTTP reason given for this switch, to report.
  returned: always
  type: list
  elements: str
reading:
  description: C({name, read, error, qos, mtu}) the operational QoS tree and each front-panel port's MTU; a
    SONiC leaf's also has C(os=sonic) and C(port_qos), the ports whose QoS differs from C(qos).
  returned: always
  type: dict
revision:
  description: The NVUE revision that applied the changes; null when nothing was applied. On a failed or
    interrupted change, the revision it made (see RV(revision_state)).
  returned: always
  type: str
revision_state:
  description: What became of the revision of a change that failed or was interrupted (a signal), one of
    C(deleted) (nothing of it applied), C(applied), C(apply) (still applying when the module gave up
    waiting) or C(unknown).
  returned: failure
  type: str
"""

from ansible_collections.gpufleet.node.plugins.module_utils.core.role_module import run
from ansible_collections.gpufleet.node.plugins.module_utils.fabric import switch_qos as role


def main():
    run(role)


if __name__ == "__main__":
    main()
