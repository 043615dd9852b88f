# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpufleet.node.fleet_versions judged in the controller's worker, no module process started.

The module's whole work is a comparison of what node_health already read (``fleet``) on the controller
(the task is delegated to localhost): run as a module it cost one Python process per node, which loaded
Ansible's module_utils from the AnsiballZ payload to compare a few strings (about 0.3 CPU-s of the
controller per node and gate, issue 40). The verdict is the same function
(module_utils/node/fleet_versions.py: validate_known, judge); the module file keeps the documentation and
runs the same where the action plugin is not used (ansible-test, a copy of the module alone).
"""

from __future__ import annotations

from ansible_collections.gpufleet.node.plugins.module_utils.core.inputs import refusal
from ansible_collections.gpufleet.node.plugins.module_utils.node.fleet_versions import judge, validate_known
from ansible_collections.gpufleet.node.plugins.plugin_utils.controller_action import ControllerAction

ARGUMENT_SPEC = dict(
    host=dict(type="str", required=True),
    fleet=dict(type="dict", required=True),
    known=dict(type="dict", default={}),
)


class ActionModule(ControllerAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def work(self, args, result):
        refused = refusal("compare the versions", validate_known(args["known"]))
        if refused:
            result.update(failed=True, msg=refused, input_error=True)
            return
        fleet = {h: (v if isinstance(v, dict) else None) for h, v in args["fleet"].items()}
        checks = judge(args["host"], fleet, args["known"])
        failed = [c for c in checks if not c["ok"]]
        result.update(changed=False, checks=checks, changes=[])
        if failed:
            result.update(failed=True, msg="; ".join(c["message"] for c in failed))
        else:
            result["msg"] = "; ".join(c["message"] for c in checks) or "no versions to compare"
