"""core/role_plan.py's Plan and the role interface: every role's module_utils file has it, and every role
module's main() is core/role_module.py's run over it."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.core import role_module
from ansible_collections.gpufleet.node.plugins.module_utils.core.results import change, check
from ansible_collections.gpufleet.node.plugins.module_utils.core.role_plan import FailedChecks, Plan
from ansible_collections.gpufleet.node.plugins.module_utils.fabric import switch_qos
from ansible_collections.gpufleet.node.plugins.module_utils.node import drift

# the six roles drift plans on a node, and switch_qos (a leaf's, on the controller: drift reads it
# through its action plugin)
ROLE_FILES = {**drift.ROLES, "switch_qos": switch_qos}
ROLES = sorted(ROLE_FILES)
MODULES = Path(__file__).resolve().parents[4] / "plugins" / "modules"
INTERFACE = ("validate", "plan", "apply", "result", "diff")


def test_the_roles_are_the_six_drift_plans() -> None:
    assert sorted(drift.ROLES) == [
        "fabric",
        "gpu_pinning",
        "gpu_power",
        "nccl_topology",
        "rdma_link",
        "rdma_qos",
    ]


def test_every_module_run_by_the_skeleton_is_a_role_here() -> None:
    skeleton = "from ansible_collections.gpufleet.node.plugins.module_utils.core.role_module import run"
    run_by_it = sorted(p.stem for p in MODULES.glob("*.py") if skeleton in p.read_text(encoding="utf-8"))
    assert run_by_it == ROLES


@pytest.mark.parametrize("name", ROLES)
def test_every_role_has_the_interface(name: str) -> None:
    role = ROLE_FILES[name]
    assert isinstance(role.ARGUMENT_SPEC, dict) and role.ARGUMENT_SPEC
    for function in INTERFACE:
        params = list(inspect.signature(getattr(role, function)).parameters)
        assert params[:2] == ["node", "params"], (name, function, params)
    assert list(inspect.signature(role.apply).parameters) == ["node", "params", "planned"]
    on_failed = getattr(role, "FAILED_CHECKS", None)
    assert on_failed is None or isinstance(on_failed, FailedChecks)


@pytest.mark.parametrize("name", ROLES)
def test_every_role_module_main_is_the_skeleton(name: str) -> None:
    """plugins/modules/<role>.py: its documentation, then main() = run(role) and nothing else."""
    module = importlib.import_module("ansible_collections.gpufleet.node.plugins.modules." + name)
    assert module.role is ROLE_FILES[name]
    assert module.run is role_module.run
    body = inspect.getsource(module.main).strip().splitlines()
    assert body == ["def main():", "    run(role)"]
    own = [n for n, v in vars(module).items() if inspect.isfunction(v) and v.__module__ == module.__name__]
    assert own == ["main"]


def test_a_plan_holds_what_every_role_returns() -> None:
    planned = Plan(
        changes=[change("gpu_power.enforced_limit_w[GPU-1]", 1100.0, 1400.0)],
        checks=[check("x.ok", True, 1, 1, "", "fine"), check("x.bad[a]", False, 0, 1, "", "a is down")],
        hints=["look here"],
        gpus=[{"uuid": "GPU-1"}],
    )
    assert planned.changed and planned.state == {"gpus": [{"uuid": "GPU-1"}]}
    assert [c["name"] for c in planned.failed_checks()] == ["x.bad[a]"]
    assert planned.result() == {
        "changed": True,
        "changes": planned.changes,
        "checks": planned.checks,
        "hints": ["look here"],
        "reboot_required": False,
    }
    assert planned.found == {"files": {}, "units": {}} and planned.files == []
    assert planned.refused is None and planned.warnings == []


def test_a_role_that_only_judges_says_nothing_of_reboots() -> None:
    result = Plan(reboot_required=None).result()
    assert result == {"changed": False, "changes": [], "checks": [], "hints": []}


def test_failed_checks_message_names_each_failed_check_with_the_roles_hint() -> None:
    failed = [check("a", False, 0, 1, "", "one"), check("b", False, 0, 1, "", "two")]
    assert FailedChecks(prefix="not ready: ", fail=False).message(failed) == "not ready: one; two"
    hinted = FailedChecks(suffix=". Check the rack's power budget.")
    assert hinted.fail and hinted.message(failed) == "one; two. Check the rack's power budget."
