"""switch_qos's plan and apply (core/role_plan.py's interface) against the simulated Cumulus leaf over TLS
(sim/nvue.py)."""

from __future__ import annotations

from typing import Any

import pytest
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible_collections.gpufleet.node.plugins.module_utils.core.role_plan import Plan
from ansible_collections.gpufleet.node.plugins.module_utils.fabric import switch_qos
from ansible_collections.gpufleet.node.plugins.module_utils.mgmt import nvue_client
from gpufleet_sim import faults_switch, nvue_state
from gpufleet_sim.bmc import tls

from tests.unit.module_utils.conftest import Leaf

ECN = "qos/congestion-control/default-global/traffic-class/3/ecn"


def params(leaf: Leaf, **given: Any) -> dict[str, Any]:
    raw = {
        "name": "leaf01",
        "address": leaf.address,
        "username": "cumulus",
        "password": leaf.password,
        "ca_path": str(leaf.ca),
    }
    result = ArgumentSpecValidator(switch_qos.ARGUMENT_SPEC).validate({**raw, **given})
    assert not result.error_messages, result.error_messages
    return result.validated_parameters


@pytest.fixture(autouse=True)
def fresh_clients() -> None:
    # client_for shares a client (and its cache) per switch within a process, as a module run does
    nvue_client._CLIENTS.clear()


class Node:
    """What the role asks of its module: a failure raises with the module's result."""

    check_mode = False

    def fail_json(self, **result: Any) -> None:
        raise AssertionError(result)


NODE = Node()


def plan(leaf: Leaf, **given: Any) -> Plan:
    planned: Plan = switch_qos.plan(NODE, params(leaf, **given))
    return planned


def test_a_healthy_leaf_has_the_profile_and_is_read_once(leaf: Leaf) -> None:
    planned = plan(leaf)
    assert planned.changes == []
    reading = planned.state["reading"]
    assert reading["read"] and reading["name"] == "leaf01"
    assert reading["mtu"] == {f"swp{i}": 9216 for i in range(1, 9)}
    assert reading["qos"]["pfc"]["default-global"]["switch-priority"] == {"3": {}}
    assert planned.checks == [
        {
            "name": "switch.nvue[leaf01]",
            "ok": True,
            "value": "read",
            "limit": "read",
            "unit": "",
            "message": "leaf01: NVUE API read",
        }
    ]


def test_faults_are_planned_applied_in_one_revision_and_then_nothing(leaf: Leaf) -> None:
    for fault in ("switch-pfc-off", "switch-ecn-off", "switch-mtu-low"):
        assert faults_switch.inject_leaf(leaf.state, fault)
    p = params(leaf, ports=["swp1"])
    planned = switch_qos.plan(NODE, p)
    assert sorted(planned.changes, key=lambda c: c["setting"]) == [
        {"setting": "interface/swp1/link/mtu", "from": 1500, "to": 9216},
        {
            "setting": "qos/congestion-control/default-global/traffic-class/3/ecn",
            "from": "disable",
            "to": "enable",
        },
        {"setting": "qos/pfc/default-global/switch-priority/3", "from": None, "to": "present"},
    ]
    before = len(nvue_state.load(leaf.state)["revisions"])
    done = switch_qos.apply(NODE, p, planned)
    assert done.state["revision"] and done.state["left"] == [] and done.changes == planned.changes
    assert len(nvue_state.load(leaf.state)["revisions"]) == before + 1
    assert done.state["reading"]["mtu"]["swp1"] == 9216 and done.state["reading"]["mtu"]["swp2"] == 1500
    again = switch_qos.plan(NODE, p)
    assert again.changes == []
    assert switch_qos.apply(NODE, p, again).state["revision"] is None
    assert len(nvue_state.load(leaf.state)["revisions"]) == before + 1


def test_manage_leaves_the_rest_alone(leaf: Leaf) -> None:
    faults_switch.inject_leaf(leaf.state, "switch-pfc-off")
    faults_switch.inject_leaf(leaf.state, "switch-dscp-lossy")
    changes = plan(leaf, manage=["pfc"]).changes
    assert [c["setting"] for c in changes] == ["qos/pfc/default-global/switch-priority/3"]


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"roce_dscp": 64}, "roce_dscp is 64; a DSCP is 0..63"),
        ({"mtu": 10000}, "mtu is 10000; an MTU in bytes is 552..9216"),
        ({"cnp_priority": 3}, "cnp_priority and roce_priority are both 3"),
        ({"cnp_dscp": 26}, "cnp_dscp and roce_dscp are both 26"),
    ],
)
def test_bad_input_is_named_with_its_range(leaf: Leaf, given: dict[str, Any], message: str) -> None:
    errors = switch_qos.input_errors(params(leaf, **given))
    assert any(e.startswith(message) for e in errors), errors


def test_an_unreachable_or_untrusted_leaf_is_a_failed_check_without_the_password(leaf: Leaf) -> None:
    p = params(leaf, address="127.0.0.1:1", timeout=2)
    down = switch_qos.plan(NODE, p)
    assert down.state["reading"]["read"] is False and down.changes == []
    check = down.checks[0]
    assert (check["name"], check["ok"], check["value"]) == ("switch.nvue[leaf01]", False, "connection")
    returned = dict(down.result(), **switch_qos.result(NODE, p, down))
    assert returned["reading"]["error"] and leaf.password not in str(returned)

    nvue_client._CLIENTS.clear()
    wrong_ca = leaf.directory.parent / "other"
    other = tls.ensure_ca(wrong_ca)
    untrusted = plan(leaf, ca_path=str(other))
    assert untrusted.checks[0]["value"] == "tls", untrusted.checks
    assert "certificate" in untrusted.checks[0]["message"]
