# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpufleet.node.switch_qos with its arguments on a pipe, never in a file.

Without pipelining, ansible writes a module with its arguments (here a leaf's NVUE password) to
``~/.ansible/tmp/ansible-tmp-*/AnsiballZ_switch_qos.py`` and removes it when the task ends; a run
stopped mid-task (gpufleet's second SIGINT, SIGTERM: the worker is killed) left it there in clear.
The module runs on the controller (connection local), whose connection can pipeline: the module and
its arguments go to the interpreter's stdin, and no file of them is written. Where pipelining cannot
be had (ANSIBLE_KEEP_REMOTE_FILES, a become method that refuses it) the task fails before anything is
sent, naming why, rather than write the password to disk.
"""

from __future__ import annotations

from ansible.plugins.action import ActionBase


class ActionModule(ActionBase):
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        self._connection.set_option("pipelining", True)
        if not self._is_pipelining_enabled("new"):
            result.update(
                failed=True,
                input_error=True,
                msg="gpufleet.node.switch_qos passes the switch password to the module on a pipe only; "
                "pipelining is not possible here (ANSIBLE_KEEP_REMOTE_FILES set, become, or a connection "
                "without pipelining), so the password would be written under ~/.ansible/tmp: unset "
                "ANSIBLE_KEEP_REMOTE_FILES and run the leaf tasks with connection local, no become",
            )
            return result
        result.update(self._execute_module(task_vars=task_vars))
        return result
