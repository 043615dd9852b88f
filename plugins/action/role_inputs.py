# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpufleet.node.role_inputs: every listed role's inputs judged in one task per host, on the controller.

Per role, the values the host's variables give (role defaults, inventory, role vars: what a play that
imported the role sees) are validated against the role's ``preflight`` entry point in
meta/argument_specs.yml (Ansible's own ArgumentSpecValidator, as include_role's validation task does),
then judged by the role's rules (module_utils/node/role_rules.py). A role whose argument spec refuses a
value is not judged further, as its asserts never ran. Every refusal of every listed role is named in
one message; the host fails with ``input_error`` (the report's configuration error, exit 2) and the
others carry on.

Nothing is sent to the node, except when the profile names a tool by path (thermal_gate's all-reduce
or DCGM diagnostic): then one shell command (role_rules.tool_command, test(1): no module, no Python)
looks for it there, once the inputs passed.

With drain among the roles, a host whose inputs passed is put in the group gpufleet_drain_<method> of
this run (group_by's way), so a playbook decides once which nodes have a scheduler to drain: the gate's
drain and undrain plays leave out gpufleet_drain_none, and a node whose method is none costs them no task.
"""

from __future__ import annotations

import os

from ansible.errors import AnsibleError
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase
from ansible_collections.gpufleet.node.plugins.module_utils.node import role_rules

# This collection's root (plugins/action/role_inputs.py is three levels down): the roles it validates
# are its own, so their argument specs are beside this file wherever the collection is installed.
_COLLECTION = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_ENTRY_POINT = "preflight"
_SPECS: dict[str, dict] = {}
_UNSET = object()
# The group a host whose inputs passed joins, per drain method (with drain among the roles).
DRAIN_GROUP_PREFIX = "gpufleet_drain_"
_TOOLS_RULE = "gpufleet.node.thermal_gate : Check that each is an executable file on the node: "


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = False
    _VALID_ARGS = frozenset(("roles",))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        roles = self._task.args.get("roles")
        if not isinstance(roles, list) or not roles or [r for r in roles if r not in role_rules.ROLES]:
            result.update(
                failed=True,
                input_error=True,
                msg=f"roles must list some of {', '.join(role_rules.ROLES)}, got {roles}",
            )
            return result
        self._values = {}
        self._task_vars = task_vars
        refused = []
        tools = []
        for role in roles:
            found = self._judge(role)
            refused.extend(found)
            if role == "thermal_gate" and not found:
                tools = role_rules.tool_paths({n: self._value(n) for n in role_rules.settings(role)})
        if not refused:
            refused = self._look_for_tools(tools, result)
            if result.get("failed") or result.get("unreachable"):
                return result
        if refused:
            result.update(failed=True, input_error=True, msg="; ".join(refused), refused=refused)
            return result
        result.update(
            changed=False, msg=f"the inputs of {', '.join(roles)} pass their argument specs and rules"
        )
        if "drain" in roles:
            self._group(result, DRAIN_GROUP_PREFIX + str(self._value("drain_method")))
        return result

    def _group(self, result, name):
        """The host put in the group ``name`` for the rest of the run, as group_by puts it."""
        result["drain_group"] = name
        add_group = getattr(self, "add_group", None)
        if add_group is not None:  # ansible-core 2.21 and later: through the strategy, at once
            add_group(name, parent_group_names=["all"])
        else:  # earlier: the strategy adds the group a result names (group_by's result)
            result.update(add_group=name, parent_groups=["all"])

    def _value(self, name):
        """The variable's value, templated once (_UNSET when the host has none)."""
        if name not in self._values:
            raw = self._task_vars.get(name, _UNSET)
            self._values[name] = raw if raw is _UNSET else self._templar.template(raw)
        return self._values[name]

    def _judge(self, role):
        """The refusals of one role: its argument spec, then its rules; each '<role> : <what>: <why>'."""
        spec = _spec(self._loader, role)
        where = f"gpufleet.node.{role} : "
        values = {}
        for name in [*(spec.get("options") or {}), *role_rules.settings(role)]:
            try:
                value = self._value(name)
            except AnsibleError as error:
                return [f"{where}{name} cannot be read: {error}"]
            if value is not _UNSET:
                values[name] = value
        options = spec.get("options") or {}
        checked = ArgumentSpecValidator(options).validate({n: v for n, v in values.items() if n in options})
        if checked.error_messages:
            # as include_role's validation task named itself and said it
            title = f"Validating arguments against arg spec '{_ENTRY_POINT}'"
            if spec.get("short_description"):
                title += " - " + spec["short_description"]
            failed = "\n".join(checked.error_messages)
            return [f"{where}{title}: Validation of arguments failed:\n{failed}"]
        unset = [n for n in role_rules.settings(role) if n not in values]
        if unset:
            return [f"{where}{', '.join(unset)}: not set (the role's defaults were not loaded)"]
        return [f"{where}{rule.name}: {message}" for rule, message in role_rules.refusals(role, values)]

    def _look_for_tools(self, tools, result):
        """Each tool the profile names by path, looked for on the node in one command (no module, no
        Python there): the refusals, a path that is no executable file there. A command that did not
        answer for every path fails the task as a failure of the node, not of its inputs."""
        if not tools:
            return []
        done = self._low_level_execute_command(role_rules.tool_command([t["path"] for t in tools]))
        found = role_rules.tool_answers(done.get("stdout", ""), len(tools)) if done.get("rc") == 0 else None
        if found is None:
            said = " ".join(str(done.get("stderr") or done.get("stdout") or "").split())[:300]
            looked = ", ".join(t["setting"] for t in tools)
            result.update(
                failed=True,
                msg=f"looking for {looked} on the node: the command exited {done.get('rc')} and did not "
                f"answer for every path ({said})",
            )
            return []
        refused = []
        for tool, stat in zip(tools, found, strict=True):
            message = role_rules.tool_refusal(tool, stat)
            if message:
                refused.append(_TOOLS_RULE + message)
        return refused


def _spec(loader, role):
    """The role's ``preflight`` entry point (meta/argument_specs.yml), loaded once per process."""
    if role not in _SPECS:
        path = os.path.join(_COLLECTION, "roles", role, "meta", "argument_specs.yml")
        data = loader.load_from_file(path) or {}
        _SPECS[role] = (data.get("argument_specs") or {}).get(_ENTRY_POINT) or {}
        if not _SPECS[role]:
            raise AnsibleError(f"{path} has no argument spec entry point {_ENTRY_POINT!r}")
    return _SPECS[role]
