#!/usr/bin/python
# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gate_stop
short_description: Withdraw the gate's markers and stop the node's vLLM instances, in one run
version_added: "0.1.0"
description:
  - What a node the post-maintenance gate did not admit is left with, whatever step stopped it (the
    thermal_gate role's C(stop.yml), its rescue's C(blocked.yml), an interrupted gate's C(gate_stop.yml)) -
    first every marker in O(markers) removed, so no restart policy brings an instance back and nothing reads
    the node as passed, then every unit in O(units) stopped (C(systemctl stop)) that is running.
  - A unit that is not installed (C(LoadState=not-found), a node never provisioned) runs nothing and is left
    as it is. A unit that is installed and fails to stop fails the module, naming it.
options:
  markers:
    description: Files to remove (a directory there is removed with what it holds).
    type: list
    elements: path
    default: []
  units:
    description: systemd units to stop, in this order.
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - gpufleet.node.attributes
attributes:
  check_mode:
    details: Says which markers it would remove and which units it would stop; removes and stops nothing.
  diff_mode:
    support: none
seealso:
  - module: gpufleet.node.service_check
author:
  - gpufleet developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Withdraw the markers and stop the instances
  gpufleet.node.gate_stop:
    markers: [/run/gpufleet/thermal-gate-passed, /run/gpufleet/gate-passed]
    units: [vllm-glm52.service, vllm-kimik3.service]
"""

RETURN = r"""
withdrawn:
  description: The markers removed (check mode - those that would be).
  returned: always
  type: list
  elements: str
  sample: ["/run/gpufleet/gate-passed"]
stopped:
  description: The units stopped (check mode - those that would be).
  returned: always
  type: list
  elements: str
  sample: ["vllm-glm52.service"]
not_installed:
  description: The units that are not installed, left as they are.
  returned: always
  type: list
  elements: str
  sample: []
"""

import os
import shutil

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.node.plugins.module_utils.vllm.vllm_service import unit_properties

# The states of a unit that runs or is about to (what ansible.builtin.systemd_service stops).
_RUNNING = ("active", "activating", "reloading", "refreshing")


def _withdraw(module, markers):
    withdrawn = []
    for path in markers:
        if not os.path.lexists(path):
            continue
        withdrawn.append(path)
        if module.check_mode:
            continue
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    return withdrawn


def main():
    module = AnsibleModule(
        argument_spec=dict(
            markers=dict(type="list", elements="path", default=[]),
            units=dict(type="list", elements="str", default=[]),
        ),
        supports_check_mode=True,
    )
    p = module.params
    withdrawn = _withdraw(module, p["markers"])
    stopped, absent = [], []
    systemctl = module.get_bin_path("systemctl", required=True) if p["units"] else None
    env = {"LC_ALL": "C"}
    for unit in p["units"]:
        rc, out, _err = module.run_command([systemctl, "show", unit], environ_update=env)
        props = unit_properties(out) if rc == 0 else {}
        if props.get("LoadState") == "not-found":
            absent.append(unit)
            continue
        if props and props.get("ActiveState") not in _RUNNING:
            continue
        stopped.append(unit)
        if module.check_mode:
            continue
        rc, out, err = module.run_command([systemctl, "stop", unit], environ_update=env)
        if rc != 0:
            module.fail_json(
                msg="could not stop %s (rc=%d): %s" % (unit, rc, (err or out).strip()),
                changed=True,
                withdrawn=withdrawn,
                stopped=stopped[:-1],
                not_installed=absent,
            )
    module.exit_json(
        changed=bool(withdrawn or stopped),
        msg="withdrew %d markers, stopped %s" % (len(withdrawn), ", ".join(stopped) or "nothing"),
        withdrawn=withdrawn,
        stopped=stopped,
        not_installed=absent,
    )


if __name__ == "__main__":
    main()
