# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpufleet.node.switch_qos: a Cumulus leaf through the module with its arguments on a pipe, never in a
file; a SONiC leaf read here, over its own connection, and never changed.

Without pipelining, ansible writes a module with its arguments (here a leaf's NVUE password) to
``~/.ansible/tmp/ansible-tmp-*/AnsiballZ_switch_qos.py`` and removes it when the task ends; a run
stopped mid-task (gpufleet's second SIGINT, SIGTERM: the worker is killed) left it there in clear.
The module runs on the controller (connection local), whose connection can pipeline: the module and
its arguments go to the interpreter's stdin, and no file of them is written. Where pipelining cannot
be had (ANSIBLE_KEEP_REMOTE_FILES, a become method that refuses it) the task fails before anything is
sent, naming why, rather than write the password to disk.

A leaf with ``os: sonic`` (inventory ``gpufleet_switch_os: sonic``) is read with ``sonic-cfggen -d
--print-data`` over the leaf's Ansible connection (SSH, as SONiC's own sonic-mgmt reads a switch's
CONFIG_DB): no module is copied to the switch, no password is sent, nothing is written there. The
text becomes the reading and the drift in the controller (module_utils/fabric/sonic_leaf.py), judged
on the nodes exactly as an NVUE leaf's. A run that would change a SONiC leaf (``gpufleet switch``
with a difference) fails naming what differs: gpufleet never changes one.

A Cumulus leaf read in check mode (drift, check, the gate's read: every run but ``gpufleet switch``)
over a local connection is read here too, in the worker, with the module's own code (module_utils
fabric/switch_qos through core/role_module.py's ``outcome``, the steps of the module's ``main()``):
the module would run in a new Python on the same controller, and ~70 % of its ~0.5 CPU-s went to
starting that Python and compiling the AnsiballZ payload's sources (bench/README.md, issue 40).
Nothing is written either way; a change (not check mode) still runs the module, on a pipe.
"""

from __future__ import annotations

from ansible.errors import AnsibleConnectionFailure
from ansible.module_utils.common.parameters import remove_values
from ansible.plugins.action import ActionBase
from ansible_collections.gpufleet.node.plugins.module_utils.core import role_module
from ansible_collections.gpufleet.node.plugins.module_utils.core.inputs import refusal
from ansible_collections.gpufleet.node.plugins.module_utils.core.results import hint
from ansible_collections.gpufleet.node.plugins.module_utils.fabric import sonic_leaf
from ansible_collections.gpufleet.node.plugins.module_utils.fabric import switch_qos as role


class _Failed(Exception):
    """The module's code failed (``args[0]``: its result, ``failed: True``)."""


class _Worker:
    """What the module's code needs of its AnsibleModule, in the action's worker: check mode, the
    task's diff, warnings kept for the result, fail_json raising :class:`_Failed` with the result."""

    check_mode = True

    def __init__(self, task):
        self._task = task
        self.warnings = []

    @property
    def _diff(self):
        return bool(self._task.diff)

    def warn(self, warning):
        self.warnings.append(warning)

    def fail_json(self, **result):
        raise _Failed(dict(result, failed=True))


class ActionModule(ActionBase):
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        if self._task.args.get("os") == "sonic":
            return self._sonic(result, task_vars or {})
        if self._task.check_mode and self._connection.transport == "local":
            return self._read_cumulus(result)
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

    def _read_cumulus(self, result):
        """The module's check mode, here: the module's own steps (core/role_module.py's ``outcome``) on
        the same validated arguments, so the same result; the password in no message."""
        validation, args = self.validate_argument_spec(argument_spec=role.ARGUMENT_SPEC)
        worker = _Worker(self._task)
        try:
            result.update(role_module.outcome(role, worker, args))
        except _Failed as failed:
            result.update(failed.args[0])
        if worker.warnings:
            result["warnings"] = worker.warnings
        return remove_values(result, validation._no_log_values)

    def _sonic(self, result, task_vars):
        _validation, args = self.validate_argument_spec(argument_spec=role.ARGUMENT_SPEC)
        name = args["name"] or task_vars.get("inventory_hostname") or self._play_context.remote_addr
        errors = role.input_errors(args)
        if self._connection.transport == "local":
            errors.append(
                f"{name} runs SONiC ({sonic_leaf.OS_SETTING}: sonic) and is read over SSH, but its "
                "connection is local: give it ansible_connection: ssh, ansible_host and ansible_user (the "
                "leaf_switches group's local connection is for Cumulus leaves)"
            )
        if errors:
            result.update(failed=True, input_error=True, msg=refusal("read the switch", errors))
            return result
        planned = self._read_sonic(args, name)
        result.update(
            changed=bool(planned["changes"]),
            changes=planned["changes"],
            checks=planned["checks"],
            reading=planned["reading"],
            revision=None,
            # said where a change was asked for (gpufleet switch), not on every read
            hints=[]
            if self._task.check_mode
            else [hint(f"{name} runs SONiC: read only, gpufleet never changes it")],
        )
        if planned["errors"]:
            result.update(failed=True, input_error=True, msg=refusal("read the switch", planned["errors"]))
        elif self._task.check_mode:
            pass
        elif not planned["reading"]["read"]:
            result.update(failed=True, msg=planned["reading"]["error"])
        elif planned["changes"]:
            result.update(failed=True, changed=False, msg=sonic_leaf.refusal(name, planned["changes"]))
        return result

    def _read_sonic(self, args, name):
        """``sonic-cfggen -d --print-data`` on the leaf (under ``timeout`` seconds), planned."""
        command = f"timeout {args['timeout']:d} {sonic_leaf.COMMAND}"
        try:
            out = self._low_level_execute_command(command)
        except AnsibleConnectionFailure as exc:
            return sonic_leaf.unread_plan(name, f"{name}: SSH to the leaf failed: {exc}", "connection")
        if out["rc"] != 0:
            said = (out.get("stderr") or out.get("stdout") or "").strip()[-300:]
            why = (
                f"did not answer within {args['timeout']:d} s (timeout)"
                if out["rc"] == 124
                else f"exited {out['rc']:d}: {said or 'no output'}"
            )
            return sonic_leaf.unread_plan(name, f"{name}: {sonic_leaf.COMMAND} {why}", "command")
        return sonic_leaf.plan(out["stdout"], args, name)
