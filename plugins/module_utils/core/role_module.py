# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every role module's ``main()``, once: :func:`run` over a role's module_utils file (core/role_plan.py).

The steps, the same for every role: build the AnsibleModule from the role's ARGUMENT_SPEC; validate;
plan; its warnings; a refused plan fails outside check mode; apply unless in check mode; the result
(Plan.result and the role's own fields); the diff; failed checks (the role's FailedChecks); the
role's last read (``verify``) after a real run; exit. A role that cannot be planned fails the module
with its message (plan_node.RoleFailed: its checks, whether the inputs are at fault), a node that
cannot be read with the role's ``UNREADABLE`` message.

Runs on the managed node (Python 3.8+, stdlib and ansible.module_utils only).
"""

from __future__ import annotations

from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.node.plugins.module_utils.core.plan_node import RoleFailed


class _Never(Exception):
    """No exception of a role that has no UNREADABLE is this."""


def run(role: Any) -> None:
    """Run ``role`` (a module_utils role file: ARGUMENT_SPEC, validate, plan, apply, result, diff) as
    this module: what its module's ``main()`` does."""
    module = AnsibleModule(argument_spec=role.ARGUMENT_SPEC, supports_check_mode=True)
    module.exit_json(**outcome(role, module, module.params))


def outcome(role: Any, module: Any, params: dict[str, Any]) -> dict[str, Any]:
    """The steps of :func:`run` on ``module`` (an AnsibleModule, or what stands for one: ``check_mode``,
    ``_diff``, ``warn``, ``fail_json``) with its validated ``params``: the module's result, or its
    failure through ``module.fail_json``. An action plugin that runs a module's code in its worker
    (gpufleet.node.switch_qos' check-mode read) gets the module's result from here."""
    unreadable, unreadable_msg = getattr(role, "UNREADABLE", (_Never, "%s"))
    try:
        role.validate(module, params)
        planned = role.plan(module, params)
        for warning in planned.warnings:
            module.warn(warning)
        if planned.refused and not module.check_mode:
            module.fail_json(msg=planned.refused, hints=planned.hints)
        if not module.check_mode:
            planned = role.apply(module, params, planned)
    except RoleFailed as exc:
        module.fail_json(msg=str(exc), checks=exc.checks, input_error=exc.input_error)
    except unreadable as exc:
        module.fail_json(msg=unreadable_msg % exc)
    result = planned.result()
    result.update(role.result(module, params, planned))
    failed = planned.failed_checks()
    on_failed = getattr(role, "FAILED_CHECKS", None)
    if failed and on_failed is not None and not on_failed.fail:
        result["msg"] = on_failed.message(failed)
    if module._diff:
        diff = role.diff(module, params, planned)
        if diff is not None:
            result["diff"] = diff
    if failed and on_failed is not None and on_failed.fail:
        module.fail_json(msg=on_failed.message(failed), **result)
    verify = getattr(role, "verify", None)
    if verify is not None and not module.check_mode:
        try:
            verify(module, params, planned, result)
        except unreadable as exc:
            module.fail_json(msg=unreadable_msg % exc)
    return result
