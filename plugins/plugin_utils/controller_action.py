# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""ControllerAction: an action plugin that does its module's whole work in the controller's worker,
no module process started (issue 40; coolant_facts, fleet_versions).

Check mode runs the same as a run (the work reads and compares, it changes nothing), no async. The
task's arguments are checked against the subclass's ARGUMENT_SPEC as the module would check them (a
refusal fails the task before any work); ``work(args, result)`` then fills the result.
"""

from __future__ import annotations

from ansible.plugins.action import ActionBase


class ControllerAction(ActionBase):
    _supports_check_mode = True
    _supports_async = False
    ARGUMENT_SPEC = None  # each subclass names its module's argument spec

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _validation, args = self.validate_argument_spec(argument_spec=self.ARGUMENT_SPEC)
        self.work(args, result)
        return result

    def work(self, args, result):
        """Fill ``result`` from the validated ``args``."""
        raise NotImplementedError
