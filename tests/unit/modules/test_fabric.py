"""gpufleet.node.fabric on a simulated b300-16 node: LLDP from the fake lldpctl (the node's cabling,
sim/build.py), the leaves' side from readings shaped as switch_qos returns them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.modules import fabric
from gpufleet_sim import faults_switch, nvue_state, state
from gpufleet_sim.tools import lldpctl

from tests.unit.modules import harness, rdmanode

HOST = {"roce_dscp": 26, "cnp_dscp": 48, "priority": 3, "mtu": 4200}
SWITCH_CHECKS = ("switch_dscp", "switch_pfc", "switch_ecn", "cnp_priority", "switch_mtu")


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> rdmanode.RdmaNode:
    return rdmanode.install(rdmanode.RdmaNode(tmp_path, {"lldpctl": lldpctl}), monkeypatch)


def cabling(node: rdmanode.RdmaNode) -> dict[str, str]:
    nics = state.load(node.root)["nics"]
    return {n["ibdev"]: f"{n['neighbor']['chassis']}:{n['neighbor']['port']}" for n in nics}


def reading(name: str, edit: Any = None) -> dict[str, Any]:
    leaf = {"applied": {"qos": nvue_state.default_qos(), "interface": {}}}
    if edit:
        edit(leaf)
    mtu = {f"swp{i}": 9216 for i in range(1, 65)}
    return {
        "name": name,
        "read": True,
        "error": None,
        "kind": None,
        "qos": leaf["applied"]["qos"],
        "mtu": mtu,
    }


def run(node: rdmanode.RdmaNode, **given: Any) -> harness.Run:
    args = {"node": "node01", "host": HOST, **given}
    return harness.run_module(fabric.main, args)


def failed(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in result["checks"] if not c["ok"]}


def test_a_node_cabled_as_planned_to_healthy_leaves_passes_every_link(node: rdmanode.RdmaNode) -> None:
    plan = cabling(node)
    result = run(
        node, cabling=plan, switches={"leaf01": reading("leaf01"), "leaf02": reading("leaf02")}
    ).result
    assert result["changed"] is False and result["changes"] == []
    assert failed(result) == {}
    names = [c["name"] for c in result["checks"]]
    assert len(names) == 8 * (1 + len(SWITCH_CHECKS))
    link = f"node01:mlx5_4 -> {plan['mlx5_4']}"
    assert f"fabric.switch_pfc[{link}]" in names and "fabric.neighbor[mlx5_4]" in names
    assert node.calls == [[f"{rdmanode.BIN}/lldpctl", "-f", "json0"]]


def test_a_swapped_cable_and_a_lossy_leaf_are_named_with_both_ends(node: rdmanode.RdmaNode) -> None:
    plan = cabling(node)
    with state.locked(node.root) as current:
        faults_switch.swap_cables(current, node.root / "sys")
    pfc_off = reading("leaf02", lambda leaf: faults_switch.LEAF_FAULTS["switch-pfc-off"][0](leaf))
    result = run(node, cabling=plan, switches={"leaf01": reading("leaf01"), "leaf02": pfc_off}).result
    bad = failed(result)
    assert bad["fabric.neighbor[mlx5_6]"]["value"] == plan["mlx5_7"]
    assert bad["fabric.neighbor[mlx5_6]"]["limit"] == plan["mlx5_6"]
    pfc = sorted(n for n in bad if n.startswith("fabric.switch_pfc["))
    # every link to leaf02, each named by the port LLDP hears (the swapped pair crosses over)
    assert pfc == sorted(
        f"fabric.switch_pfc[node01:{ibdev} -> {plan[other]}]"
        for ibdev, other in (
            ("mlx5_4", "mlx5_4"),
            ("mlx5_5", "mlx5_5"),
            ("mlx5_6", "mlx5_7"),
            ("mlx5_7", "mlx5_6"),
        )
    )
    assert set(bad) == {"fabric.neighbor[mlx5_6]", "fabric.neighbor[mlx5_7]", *pfc}


def test_a_leaf_not_read_fails_its_links_closed_and_the_other_is_still_judged(
    node: rdmanode.RdmaNode,
) -> None:
    down = {
        "name": "leaf02",
        "read": False,
        "error": "switch leaf02: connection refused",
        "qos": {},
        "mtu": {},
    }
    result = run(node, switches={"leaf01": reading("leaf01"), "leaf02": down}).result
    bad = failed(result)
    assert list(bad) == ["fabric.switch_read[leaf02]"]
    assert "connection refused" in bad["fabric.switch_read[leaf02]"]["message"]
    assert sum(c["name"].startswith("fabric.switch_pfc[") for c in result["checks"]) == 4
    # a leaf the inventory has that this run did not read at all (left out by a --limit)
    result = run(node, switches={"leaf01": reading("leaf01"), "leaf02": {}}).result
    assert "not read in this run" in failed(result)["fabric.switch_read[leaf02]"]["message"]


def test_a_leaf_outside_the_inventory_is_a_hint_not_a_verdict(node: rdmanode.RdmaNode) -> None:
    result = run(node, switches={"leaf01": reading("leaf01")}).result
    assert failed(result) == {}
    assert result["hints"] == [
        "leaf02: not read for this node (not in leaf_switches, or not a leaf of its cabling plan), so the "
        "switch side of its links is not checked"
    ]


def test_no_lldpd_with_a_cabling_plan_fails_naming_the_tool(node: rdmanode.RdmaNode) -> None:
    node.installed.clear()
    outcome = harness.run_module(fabric.main, {"node": "node01", "host": HOST, "cabling": cabling(node)})
    assert outcome.result.get("failed") and "lldpctl is not installed" in outcome.result["msg"]
    assert outcome.result["checks"][0]["name"] == "fabric.lldp"


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (
            {"cabling": {"mlx5_0": "leaf01"}},
            "cabling[mlx5_0] is 'leaf01'; give the switch and its port as leaf02:swp14",
        ),
        ({"host": dict(HOST, priority=9)}, "host.priority is 9; allowed 0..7"),
    ],
)
def test_bad_input_is_refused_before_reading(
    node: rdmanode.RdmaNode, given: dict[str, Any], message: str
) -> None:
    outcome = harness.run_module(fabric.main, {"node": "node01", "host": HOST, **given})
    assert (
        outcome.result.get("failed")
        and outcome.result["msg"] == message
        and outcome.result["input_error"] is True
    )
    assert node.calls == []


def test_a_port_without_link_is_left_to_rdma_link(node: rdmanode.RdmaNode) -> None:
    node.fault("link-down")
    result = run(
        node, cabling=cabling(node), switches={"leaf01": reading("leaf01"), "leaf02": reading("leaf02")}
    ).result
    assert failed(result) == {}
    assert not any("mlx5_7" in c["name"] for c in result["checks"])
    assert result["hints"] == ["mlx5_7: link down, cabling and leaf not judged until it is up"]


def test_a_cabling_plan_for_a_device_the_node_lacks_is_a_configuration_error(node: rdmanode.RdmaNode) -> None:
    plan = {**cabling(node), "mlx5_99": "leaf01:swp99"}
    outcome = harness.run_module(
        fabric.main,
        {"node": "node01", "host": HOST, "cabling": plan, "switches": {"leaf01": reading("leaf01")}},
    )
    assert outcome.result.get("failed") and outcome.result["input_error"] is True
    assert outcome.result["msg"].startswith(
        "fabric_cabling names mlx5_99, which this node does not have as a RoCE port (its RoCE ports: mlx5_0, "
    )
    assert node.calls == []  # refused before LLDP was read
