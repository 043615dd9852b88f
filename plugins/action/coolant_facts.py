# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpufleet.node.coolant_facts read in the controller's worker, no module process started.

The BMC is read from the controller (it reaches the management network; the task is delegated to
localhost). Run as a module, each read cost one more Python process on the controller per node, which
loaded Ansible's module_utils from the AnsiballZ payload (about 0.3 CPU-s; the gate reads every node's BMC
twice, issue 40). The read is the same function (module_utils/mgmt/coolant_read.py); the password and the
session token are masked in the result as the module's no_log masks them.
"""

from __future__ import annotations

from ansible.module_utils.common.parameters import remove_values
from ansible_collections.gpufleet.node.plugins.module_utils.mgmt.coolant_read import ARGUMENT_SPEC, read
from ansible_collections.gpufleet.node.plugins.plugin_utils.controller_action import ControllerAction


class ActionModule(ControllerAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def work(self, args, result):
        warnings = []
        read_result, secrets = read(args, warnings.append)
        masked = {s for s in [args["password"], *secrets] if s}
        result.update(remove_values(read_result, masked))
        if warnings:
            result["warnings"] = remove_values(warnings, masked)
