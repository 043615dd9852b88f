# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The role interface: what a role's module_utils file holds, and :class:`Plan`, what its plan returns.

A role (``gpu/gpu_power.py``, ``rdma/rdma_link.py``, ``fabric/fabric.py``, ...) is a module_utils file with

- ``ARGUMENT_SPEC``: its module's options;
- ``validate(node, params) -> None``: every rule on the options, before anything is read (fails
  through ``node.fail_json``, or raises plan_node.RoleFailed);
- ``plan(node, params) -> Plan``: reads the node and says what would change; writes nothing, so
  node_facts (drift) runs it on a read-only plan_node.PlanNode;
- ``apply(node, params, plan) -> Plan``: makes the planned changes and verifies them (the plan's
  ``checks`` become the checks after the change);
- ``result(node, params, plan) -> dict``: its module's own return values (``gpus``, ``ports``, ...),
  beside the ones every role returns (:meth:`Plan.result`);
- ``diff(node, params, plan)``: its module's diff (``--diff``);
- optionally ``FAILED_CHECKS`` (:class:`FailedChecks`: what a failed check does to the module),
  ``UNREADABLE`` (``(exception types, message with one %s)``: a node that cannot be read), and
  ``verify(node, params, plan, result)``, a last read after a run that was not in check mode.

core/role_module.py's ``run`` is every role module's ``main()`` over that interface, and
node/drift.py plans every role through the same ``validate`` and ``plan``.

Runs on the managed node (Python 3.8+, stdlib only).
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.node.plugins.module_utils.core import boot_files


class FailedChecks:
    """What the module does when a check of the plan failed: its message is ``prefix`` + the failed
    checks' messages joined with '; ' + ``suffix`` (the hint); with ``fail`` the module fails with it,
    else it exits with it in ``msg`` and the role's task decides (its ``failed_when``)."""

    def __init__(self, prefix: str = "", suffix: str = "", fail: bool = True) -> None:
        self.prefix = prefix
        self.suffix = suffix
        self.fail = fail

    def message(self, failed: list[dict[str, Any]]) -> str:
        return self.prefix + "; ".join(c["message"] for c in failed) + self.suffix


class Plan:
    """What a role's plan read and would change, and (after ``apply``) what it changed and verified.

    What every role has: ``changes`` (``{setting, from, to}``), ``checks`` (core/results.py's),
    ``hints``, ``files`` and ``found`` (its boot files, core/boot_files.py: rendered, and what the node
    has; their diffs), ``reboot_required`` (None for a role that only judges and says nothing of
    reboots), ``warnings`` (for the module's warnings) and ``refused`` (a reason the plan must not be
    applied: outside check mode the module fails with it). ``state``: the role's own readings and plan
    (the GPUs, the ports, the file to write), which its ``apply``, ``result`` and ``diff`` read.
    """

    def __init__(
        self,
        changes: list[dict[str, Any]] | None = None,
        checks: list[dict[str, Any]] | None = None,
        hints: list[str] | None = None,
        files: list[dict[str, Any]] | None = None,
        found: dict[str, Any] | None = None,
        reboot_required: bool | None = False,
        warnings: list[str] | None = None,
        refused: str | None = None,
        **state: Any,
    ) -> None:
        self.changes = list(changes or [])
        self.checks = list(checks or [])
        self.hints = list(hints or [])
        self.files = list(files or [])
        self.found = found if found is not None else {"files": {}, "units": {}}
        self.reboot_required = reboot_required
        self.warnings = list(warnings or [])
        self.refused = refused
        self.state = state

    def __repr__(self) -> str:
        return "Plan(changes=%r, checks=%r, hints=%r, state=%s)" % (
            self.changes,
            self.checks,
            self.hints,
            sorted(self.state),
        )

    @property
    def changed(self) -> bool:
        return bool(self.changes)

    def failed_checks(self) -> list[dict[str, Any]]:
        return [c for c in self.checks if not c["ok"]]

    def result(self) -> dict[str, Any]:
        """The return values every role module has: changed, changes, checks, hints, reboot_required
        (this one left out where the role says nothing of reboots)."""
        result = dict(changed=self.changed, changes=self.changes, checks=self.checks, hints=self.hints)
        if self.reboot_required is not None:
            result["reboot_required"] = self.reboot_required
        return result


def boot_plan(
    node: Any, role: str, files: list[dict[str, Any]], changes: list[dict[str, Any]], **fields: Any
) -> Plan:
    """The Plan of a role that keeps boot files: ``files`` (core/boot_files.py's, rendered) read from the
    node, their changes after the role's own ``changes``; ``fields``: the rest of the Plan."""
    found = boot_files.read(node, files)
    return Plan(list(changes) + boot_files.compare(role, files, found), files=files, found=found, **fields)
