"""fleet_versions: the odd node out among peers (same GPU product), named with both values; with too few
peers, against the fleet's known versions (thermal_gate_fleet_versions)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.node import fleet_versions

from tests.unit.sim_versions import versions


def by_name(checks: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in checks}


def test_the_odd_node_out_is_named_with_its_value_and_the_peers() -> None:
    fleet = {f"node{i:02d}": versions() for i in range(1, 10)}
    fleet["node05"] = versions(vbios=["97.00.82.00.00"], nic_firmware=["40.46.1005"])
    odd = by_name(fleet_versions.judge("node05", fleet))
    vbios = odd["fleet.versions[vbios]"]
    assert (vbios["ok"], vbios["value"], vbios["limit"]) == (False, "97.00.82.00.00", "97.10.4A.00.02")
    assert (
        "8 of the 9 nodes of NVIDIA B300 SXM6 AC" in vbios["message"] and "odd node out" in vbios["message"]
    )
    assert odd["fleet.versions[nic_firmware]"]["ok"] is False
    assert odd["fleet.versions[driver]"]["ok"] is True and odd["fleet.versions[cuda]"]["ok"] is True
    # its peers pass
    assert all(c["ok"] for c in fleet_versions.judge("node01", fleet))


def test_other_products_are_not_peers_but_a_node_with_a_gpu_gone_is() -> None:
    fleet = {f"node{i:02d}": versions() for i in range(1, 5)}
    # a GPU fell off the bus (health.gpu_count names it): still judged with its peers, not alone
    fleet["node05"] = versions(gpu_count=15, driver="570.1")
    fleet["h100a"] = versions(gpu_product=["NVIDIA H100 80GB HBM3"], gpu_count=8, driver="550.1")
    assert all(c["ok"] for c in fleet_versions.judge("node01", fleet))
    driver = by_name(fleet_versions.judge("node05", fleet))["fleet.versions[driver]"]
    assert (driver["ok"], driver["value"], driver["limit"]) == (False, "570.1", "580.95.05")
    assert "4 of the 5 nodes" in driver["message"]
    (alone,) = fleet_versions.judge("h100a", fleet)
    assert alone["name"] == "fleet.versions" and alone["ok"] is True and "not compared" in alone["message"]
    assert "thermal_gate_fleet_versions" in alone["message"]


def test_two_nodes_or_no_majority_judge_nothing() -> None:
    two = {"a": versions(), "b": versions(driver="570.1")}
    assert all(c["ok"] for c in fleet_versions.judge("b", two))
    split = {
        "a": versions(),
        "b": versions(driver="570.1"),
        "c": versions(driver="575.2"),
        "d": versions(driver="570.1"),
    }
    driver = by_name(fleet_versions.judge("c", split))["fleet.versions[driver]"]
    assert driver["ok"] is True and "do not agree" in driver["message"]
    assert fleet_versions.judge("x", {"x": None}) == []


def test_the_whole_fleet_at_once_is_each_nodes_judgement() -> None:
    """judge_all (drift, on the controller: each group counted once) gives every node what judge gives it."""
    fleet: dict[str, dict[str, Any] | None] = {f"node{i:02d}": versions() for i in range(1, 8)}
    fleet["node03"] = versions(vbios=["97.00.82.00.00"])
    fleet["node06"] = versions(gpu_count=15)
    fleet["h100a"] = versions(gpu_product=["NVIDIA H100 80GB HBM3"], gpu_count=8)
    fleet["gone"] = None
    split = {"a": versions(), "b": versions(driver="570.1"), "c": versions(driver="575.2")}
    for case in (fleet, split):
        every = fleet_versions.judge_all(case)
        assert every == {host: fleet_versions.judge(host, case) for host in case if case[host]}
    assert by_name(fleet_versions.judge_all(fleet)["node03"])["fleet.versions[vbios]"]["ok"] is False


KNOWN = {
    "NVIDIA B300 SXM6 AC": {
        "driver": "580.95.05",
        "cuda": "13.0",
        "vbios": "97.10.4A.00.02",
        "nic_firmware": ["40.44.1036"],
    }
}


def test_a_lone_node_is_judged_against_the_fleets_known_versions() -> None:
    """gate --limit node02: its VBIOS and NIC firmware changed in maintenance, no peer in the run."""
    lone = {"node02": versions(vbios=["97.10.4A.00.01"], nic_firmware=["40.44.1035"])}
    found = by_name(fleet_versions.judge("node02", lone, KNOWN))
    vbios = found["fleet.versions[vbios]"]
    assert (vbios["ok"], vbios["value"], vbios["limit"]) == (False, "97.10.4A.00.01", "97.10.4A.00.02")
    assert "the fleet's known 97.10.4A.00.02" in vbios["message"]
    assert "thermal_gate_fleet_versions" in vbios["message"] and "fewer than 3" in vbios["message"]
    assert found["fleet.versions[nic_firmware]"]["ok"] is False
    assert found["fleet.versions[driver]"]["ok"] is True and found["fleet.versions[cuda]"]["ok"] is True
    # without the known versions the same node passes unjudged, as before
    (unjudged,) = fleet_versions.judge("node02", lone)
    assert unjudged["ok"] is True and "not compared" in unjudged["message"]


def test_two_nodes_each_judged_against_the_known_versions() -> None:
    two = {"node02": versions(vbios=["97.10.4A.00.01"]), "node03": versions()}
    assert all(c["ok"] for c in fleet_versions.judge("node03", two, KNOWN))
    assert by_name(fleet_versions.judge("node02", two, KNOWN))["fleet.versions[vbios]"]["ok"] is False
    every = fleet_versions.judge_all(two, KNOWN)
    assert every == {host: fleet_versions.judge(host, two, KNOWN) for host in two}


def test_known_versions_of_some_fields_judge_those_only() -> None:
    lone = {"a": versions(driver="570.1", vbios=["97.10.4A.00.01"])}
    found = by_name(fleet_versions.judge("a", lone, {"NVIDIA B300 SXM6 AC": {"vbios": ["97.10.4A.00.02"]}}))
    assert found["fleet.versions[vbios]"]["ok"] is False
    driver = found["fleet.versions[driver]"]
    assert driver["ok"] is True and "gives no GPU driver for it: not judged" in driver["message"]
    # another product's known versions do not apply
    (other,) = fleet_versions.judge("a", lone, {"NVIDIA H100 80GB HBM3": {"driver": "550.1"}})
    assert other["name"] == "fleet.versions" and "not compared" in other["message"]


def test_the_majority_of_enough_peers_wins_and_known_versions_settle_a_split() -> None:
    # three peers agree on a driver the setting does not know yet (a rollout): the majority decides
    fleet = {f"n{i}": versions(driver="590.1") for i in range(3)}
    assert all(c["ok"] for c in fleet_versions.judge("n0", fleet, KNOWN))
    split = {"a": versions(), "b": versions(driver="570.1"), "c": versions(driver="575.2"), "d": versions()}
    split["d"] = versions(driver="570.1")
    driver = by_name(fleet_versions.judge("c", split, KNOWN))["fleet.versions[driver]"]
    assert (driver["ok"], driver["limit"]) == (False, "580.95.05") and "do not agree" in driver["message"]


@pytest.mark.parametrize(
    ("known", "wrong"),
    [
        ([], "must map a GPU product to its versions, got list"),
        ({"NVIDIA B300 SXM6 AC": "580.95.05"}, "must map some of driver, cuda, vbios, nic_firmware"),
        ({"NVIDIA B300 SXM6 AC": {"bios": "1"}}, "'bios' is not one of driver, cuda, vbios, nic_firmware"),
        ({"NVIDIA B300 SXM6 AC": {"cuda": 13.0}}, r"\[cuda\] must be a version string \(quote it"),
        ({"NVIDIA B300 SXM6 AC": {"driver": ["580.95.05"]}}, r"\[driver\] must be a version string \(quote"),
        ({"NVIDIA B300 SXM6 AC": {"vbios": [""]}}, r"\[vbios\] must be a version string or a list of them"),
        ({"": {"driver": "1"}}, "the GPU product must be its name as nvidia-smi prints it"),
    ],
)
def test_bad_known_versions_are_named_with_the_setting(known: Any, wrong: str) -> None:
    errors = fleet_versions.validate_known(known)
    assert errors and all(e.startswith("thermal_gate_fleet_versions") for e in errors)
    assert any(re.search(wrong, e) for e in errors), errors
    assert fleet_versions.validate_known(KNOWN) == [] and fleet_versions.validate_known({}) == []
