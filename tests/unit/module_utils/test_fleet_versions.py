"""fleet_versions: the odd node out among peers (same GPU product and count), named with both values."""

from __future__ import annotations

from typing import Any

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
        "8 of the 9 nodes of 16 x NVIDIA B300 SXM6 AC" in vbios["message"]
        and "odd node out" in vbios["message"]
    )
    assert odd["fleet.versions[nic_firmware]"]["ok"] is False
    assert odd["fleet.versions[driver]"]["ok"] is True and odd["fleet.versions[cuda]"]["ok"] is True
    # its peers pass
    assert all(c["ok"] for c in fleet_versions.judge("node01", fleet))


def test_other_products_and_gpu_counts_are_not_peers() -> None:
    fleet = {f"node{i:02d}": versions() for i in range(1, 5)}
    fleet["node05"] = versions(gpu_count=15, driver="570.1")  # a GPU fell off the bus: not a peer
    fleet["h100a"] = versions(gpu_product=["NVIDIA H100 80GB HBM3"], gpu_count=8, driver="550.1")
    assert all(c["ok"] for c in fleet_versions.judge("node01", fleet))
    (alone,) = fleet_versions.judge("node05", fleet)
    assert alone["name"] == "fleet.versions" and alone["ok"] is True and "not compared" in alone["message"]


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
