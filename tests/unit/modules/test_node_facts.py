"""gpufleet.node.node_facts runs each role's own validate + plan (module_utils/<domain>/<role>.py), so
drift and the role module's check mode give the same changes and messages; its options are each role
module's spec."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import yaml
from ansible_collections.gpufleet.node.plugins.module_utils.core.role_plan import Plan
from ansible_collections.gpufleet.node.plugins.module_utils.nccl import nccl_topology as nccl_topology_role
from ansible_collections.gpufleet.node.plugins.module_utils.node import drift
from ansible_collections.gpufleet.node.plugins.module_utils.rdma import rdma_read
from ansible_collections.gpufleet.node.plugins.modules import nccl_topology, node_facts, rdma_link
from gpufleet_sim import faults

from tests.unit.modules import harness
from tests.unit.modules.simnode import SMI, SimNode, run_module, topology_node

REPO = Path(__file__).resolve().parents[3]
QUERY = [SMI, "--query-gpu=index,uuid,pci.bus_id,compute_cap", "--format=csv,noheader"]
TOPO = [SMI, "topo", "-m"]


@pytest.fixture
def node(tmp_path: Path):
    with (
        topology_node(tmp_path) as sim,
        mock.patch.object(rdma_read, "SYSFS_ROOT", str(tmp_path / "no-rdma")),
    ):
        yield sim


def test_a_setting_added_to_one_roles_plan_shows_in_check_mode_and_in_drift(
    node: SimNode, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One function changed (the role's plan in module_utils), no other file: provision --check (the
    role module in check mode) and drift (node_facts) both report the new setting."""
    original = nccl_topology_role.plan
    added = {"setting": "nccl_topology.new_setting", "from": "old", "to": "new"}

    def plan(node: Any, params: dict[str, Any]) -> Plan:
        planned = original(node, params)
        planned.changes.append(dict(added))
        return planned

    monkeypatch.setattr(nccl_topology_role, "plan", plan)
    path = str(tmp_path / "topo.xml")
    checked, _ = run_module(nccl_topology.main, {"path": path}, node, check_mode=True)
    node.calls.clear()
    compared, _ = run_module(node_facts.main, {"nccl_topology": {"path": path}}, node)
    assert node.calls == [QUERY, TOPO]
    assert checked["changes"][-1] == added
    assert compared["changes"] == checked["changes"]
    assert compared["roles"]["nccl_topology"] == {
        "changes": len(checked["changes"]),
        "checks": 0,
        "error": None,
    }
    assert compared["changed"] is False
    assert not Path(path).exists()


def test_a_role_that_cannot_be_planned_fails_with_its_modules_message(node: SimNode) -> None:
    checked, _ = run_module(rdma_link.main, {}, node, check_mode=True)
    compared, _ = run_module(node_facts.main, {"rdma_link": {}}, node)
    assert checked["failed"] and checked["msg"].startswith("No mlx5 RDMA devices under /sys/class/infiniband")
    assert compared["failed"] and compared["roles"]["rdma_link"]["error"] == checked["msg"]
    assert compared["msg"] == "rdma_link: " + checked["msg"]


def test_a_node_left_drained_is_a_failed_check_until_its_record_is_gone(
    node: SimNode, tmp_path: Path
) -> None:
    record = tmp_path / "drained"
    options = {"nccl_topology": {"path": str(tmp_path / "topo.xml")}, "drain_record": str(record)}
    compared, _ = run_module(node_facts.main, options, node)
    assert [c["name"] for c in compared["checks"]] == []
    record.write_text("drained by gpufleet: gpufleet drift --fix\n")
    compared, _ = run_module(node_facts.main, options, node)
    (left,) = compared["checks"]
    assert (left["name"], left["ok"], left["value"], left["limit"]) == (
        "drain.left_drained",
        False,
        "drained by gpufleet: gpufleet drift --fix",
        "in service",
    )
    assert str(record) in left["message"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        pytest.param(
            {"rdma_link": {"tos": 300}}, "rdma_link: tos: 300 is not a type of service", id="rdma_link"
        ),
        pytest.param(
            {"rdma_qos": {"pfc_priorities": [3, 9]}},
            "rdma_qos: pfc_priorities: 9 is not a priority",
            id="rdma_qos",
        ),
        pytest.param(
            {"gpu_power": {"limits": {"GPU-1": 1000}}},
            "gpu_power: limits: keys must be GPU UUIDs",
            id="gpu_power",
        ),
        pytest.param(
            {"rdma_qos": {"trust": "lossless"}},
            "value of trust must be one of: dscp, pcp",
            id="argument-spec",
        ),
        pytest.param(
            {"gpu_pinning": {"instances": [{"name": "a"}]}}, "one of the following is required", id="sub-spec"
        ),
        pytest.param(
            # drift no longer validates the fabric role's variables on the controller (no per-host task)
            {"fabric": {"node": "n", "cabling": ["mlx5_0"], "host": {}}},
            "argument 'cabling' is of type list",
            id="fabric-cabling-not-a-mapping",
        ),
    ],
)
def test_bad_input_is_refused_before_anything_is_read(
    node: SimNode, options: dict[str, Any], message: str
) -> None:
    """Each role's options go through that role module's own argument spec and input rules: a refusal
    names the role and is a configuration error (gpufleet exits 2), never a drifted node."""
    result, _ = run_module(node_facts.main, {**options, "nccl_topology": {}}, node)
    assert result["failed"] and message in result["msg"], result["msg"]
    assert result["msg"].startswith(next(iter(options)) + ": ") and result["input_error"] is True
    assert "roles" not in result and node.calls == []


def test_the_options_are_checked_by_the_role_modules_spec(node: SimNode) -> None:
    """node_facts takes each role's options as a dict and checks them against that role module's own
    ARGUMENT_SPEC (drift.validate_roles), whose defaults and types it then plans with."""
    spec = node_facts_spec()
    for role in drift.ROLES:
        assert spec[role] == {"type": "dict"}
    validated = drift.validate_roles(None, {"rdma_qos": {"trust": "dscp", "pfc_priorities": ["3"]}})
    assert validated["rdma_qos"]["pfc_priorities"] == [3]
    assert set(validated["rdma_qos"]) == set(drift.ROLES["rdma_qos"].ARGUMENT_SPEC)


def test_the_top_level_options_are_documented() -> None:
    """node_facts' role options are plain dicts (the role modules document their contents); the
    top level matches its documentation, as ansible-test's validate-modules also checks."""
    spec = node_facts_spec()
    options = harness.documentation(node_facts)["options"]
    assert sorted(options) == sorted(spec)
    for name, arg in spec.items():
        doc = options[name]
        for key, default in (("type", "str"), ("default", None), ("required", False), ("choices", None)):
            assert doc.get(key, default) == arg.get(key, default), (name, key)
        assert doc.get("elements") == arg.get("elements"), name


def node_facts_spec() -> dict[str, Any]:
    captured: dict[str, Any] = {}

    class Stop(Exception):
        pass

    def capture(**kwargs: Any) -> None:
        captured.update(kwargs["argument_spec"])
        raise Stop

    with mock.patch.object(node_facts, "AnsibleModule", side_effect=capture), pytest.raises(Stop):
        node_facts.main()
    return captured


@pytest.mark.parametrize("role", list(drift.ROLES))
def test_each_role_gives_its_module_and_drift_one_set_of_options(role: str) -> None:
    """vars/main.yml's __<role>_options names only options of the role's module, its tasks hand it
    to the module, and playbooks/tasks/plan_roles.yml (drift, and the judgement before provision and the
    gate change anything) to node_facts: one list of arguments, no copy."""
    options = yaml.safe_load((REPO / "roles" / role / "vars" / "main.yml").read_text())[f"__{role}_options"]
    assert set(options) <= set(drift.ROLES[role].ARGUMENT_SPEC), role
    # the module run is in tasks/run.yml where the role has one (main.yml imports it after the input check)
    entry = "run.yml" if (REPO / "roles" / role / "tasks" / "run.yml").exists() else "main.yml"
    tasks = yaml.safe_load((REPO / "roles" / role / "tasks" / entry).read_text())
    text = yaml.safe_dump(tasks)
    assert f"gpufleet.node.{role}: '{{{{ __{role}_options }}}}'" in text
    plan_tasks = yaml.safe_load((REPO / "playbooks" / "tasks" / "plan_roles.yml").read_text())
    facts = next(t for t in plan_tasks if "gpufleet.node.node_facts" in t)
    assert facts["gpufleet.node.node_facts"][role] == f"{{{{ __{role}_options }}}}"
    imports = [t["ansible.builtin.import_role"] for t in plan_tasks if "ansible.builtin.import_role" in t]
    # no validation task per host: node_facts validates with the module's own spec (validate_roles)
    assert {"name": f"gpufleet.node.{role}", "tasks_from": "options", "rolespec_validate": False} in imports
    assert yaml.safe_load((REPO / "roles" / role / "tasks" / "options.yml").read_text()) == []


def test_a_limit_the_node_cannot_meet_is_an_input_error(node: SimNode) -> None:
    compared, _ = run_module(node_facts.main, {"gpu_power": {"limit_w": 1500.0, "boot_unit": False}}, node)
    assert compared["failed"] and compared["input_error"] is True
    assert "target 1500 W is outside its allowed range" in compared["msg"]


def test_a_judgement_before_a_run_reports_no_change_of_its_own(node: SimNode, tmp_path: Path) -> None:
    options = {"nccl_topology": {"path": str(tmp_path / "topo.xml")}}
    compared, _ = run_module(node_facts.main, options, node)
    judged, _ = run_module(node_facts.main, dict(options, report_changes=False), node)
    assert compared["changes"] and judged["changes"] == []
    assert judged["roles"]["nccl_topology"]["changes"] == len(compared["changes"]) > 0


def test_drift_reads_the_versions_beside_the_roles_with_one_more_read(node: SimNode, tmp_path: Path) -> None:
    """versions (drift): node_health's gpufleet_versions fact from one nvidia-smi -q -x, the only read
    added; without it (provision, the gate) nothing more is read and no fact is returned."""
    options = {"nccl_topology": {"path": str(tmp_path / "topo.xml")}}
    without, _ = run_module(node_facts.main, options, node)
    assert "ansible_facts" not in without and [SMI, "-q", "-x"] not in node.calls
    node.calls.clear()
    compared, _ = run_module(node_facts.main, dict(options, versions=True), node)
    assert sorted(node.calls) == sorted([QUERY, TOPO, [SMI, "-q", "-x"]])
    found = compared["ansible_facts"]["gpufleet_versions"]
    assert (found["gpu_count"], found["driver"], found["vbios"]) == (16, "580.95.05", ["97.10.4A.00.02"])
    assert compared["changes"] == without["changes"] and compared["checks"] == without["checks"] == []


def test_versions_that_cannot_be_read_fail_the_node_naming_the_read(node: SimNode, tmp_path: Path) -> None:
    """A failed check and a failed module (as a role that cannot be planned: drift --fix leaves the node
    out of its rollout), the roles' changes still reported, no fact."""
    options = {"nccl_topology": {"path": str(tmp_path / "topo.xml")}, "versions": True}

    def no_xml(module: Any, args: list[str], **kwargs: Any) -> tuple[int, str, str]:
        if args[1:] == ["-q", "-x"]:
            return 6, "", "Unable to determine the device handle for GPU0000:1B:00.0: Unknown Error"
        return node(module, args, **kwargs)

    compared = harness.run_module(node_facts.main, options, run_command=no_xml, get_bin_path=SMI).result
    assert "ansible_facts" not in compared and compared["failed"] is True
    (failed,) = compared["checks"]
    assert (failed["name"], failed["ok"]) == ("fleet.versions", False)
    assert "nvidia-smi -q -x failed (rc=6): Unable to determine the device handle" in failed["message"]
    assert compared["msg"] == failed["message"]
    assert compared["changes"] and compared["roles"]["nccl_topology"]["error"] is None


def test_an_oversized_field_in_the_xml_fails_the_node_naming_it_in_a_small_result(
    node: SimNode, tmp_path: Path
) -> None:
    """The simulator's nvsmi-oversized-field (a 2 MiB product name in -q -x): refused by name, and the
    result stays small (ansible-runner passes on an empty result in place of one over 700000
    characters: the node read as ok with 0 checks)."""
    faults.inject(node.dir, "nvsmi-oversized-field")
    options = {"nccl_topology": {"path": str(tmp_path / "topo.xml")}, "versions": True}
    compared, _ = run_module(node_facts.main, options, node)
    assert compared["failed"] is True and "ansible_facts" not in compared
    (failed,) = compared["checks"]
    assert (failed["name"], failed["ok"], failed["value"]) == ("fleet.versions", False, None)
    assert (
        "nvidia-smi -q -x: the text of <product_name> of GPU '00000000:13:00.0' is 2097152 characters long "
        "(nvidia-smi prints no field over 1024)" in failed["message"]
    )
    assert len(str(compared)) < 20_000
