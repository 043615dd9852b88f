"""Drift's odd node out: each node's versions (node_facts' gpufleet_versions) compared on the controller
across every node of the report by the gate's judge (fleet_versions), the same for a local run, its
console lines and the slices of one job (report --from-events)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from gpufleet import drift, events, from_events
from gpufleet.commands import registry
from gpufleet.report import HostReport
from tests.unit.runner_artifacts import COMPARE, READ
from tests.unit.runner_artifacts import artifacts as _artifacts
from tests.unit.sim_versions import versions

ODD = {"vbios": ["97.10.4A.00.01"], "nic_firmware": ["40.44.1035"]}


def res(found: dict[str, Any] | None, known: Any = None) -> dict[str, Any]:
    """node_facts' result: no change, no check, the versions as a fact when it read them (and the fleet's
    known versions when the inventory sets them)."""
    out: dict[str, Any] = {"changes": [], "checks": []}
    if found is not None:
        out["ansible_facts"] = {"gpufleet_versions": found}
        if known is not None:
            out["ansible_facts"]["gpufleet_known_versions"] = known
    return out


def host(name: str, found: dict[str, Any] | None, known: Any = None) -> events.HostResult:
    collector = events.Collector()
    event_data = {"host": name, "play": COMPARE, "res": res(found, known)}
    collector.add({"event": "runner_on_ok", "event_data": event_data})
    return collector.hosts[name]


def fleet() -> dict[str, events.HostResult]:
    hosts = {f"node0{i}": host(f"node0{i}", versions()) for i in range(1, 5)}
    hosts["node03"] = host("node03", versions(**ODD))
    hosts["leaf01"] = host("leaf01", None)
    return hosts


def failed(checks: list[dict[str, Any]]) -> dict[str, tuple[Any, Any]]:
    return {c["name"]: (c["value"], c["limit"]) for c in checks if not c["ok"]}


def test_the_odd_node_out_fails_with_its_version_against_the_peers_majority() -> None:
    hosts = fleet()
    drift.compare_versions(hosts)
    assert failed(hosts["node03"].checks) == {
        "fleet.versions[vbios]": ("97.10.4A.00.01", "97.10.4A.00.02"),
        "fleet.versions[nic_firmware]": ("40.44.1035", "40.44.1036"),
    }
    judged = drift.drift_host(hosts["node03"])
    assert judged.status == "failed"
    assert "node03: GPU VBIOS 97.10.4A.00.01 differs from the 97.10.4A.00.02 that 3 of the 4 nodes" in (
        judged.message
    )
    # its peers pass all four fields, and are not named; a leaf has no versions and is not judged
    for name in ("node01", "node02", "node04"):
        names = [c["name"] for c in hosts[name].checks]
        assert names == [f"fleet.versions[{f}]" for f in ("driver", "cuda", "vbios", "nic_firmware")]
        assert failed(hosts[name].checks) == {} and drift.drift_host(hosts[name]).status == "ok"
        assert all("node03" not in c["message"] for c in hosts[name].checks)
    assert hosts["leaf01"].checks == []


def test_judging_the_same_hosts_again_adds_nothing() -> None:
    hosts = fleet()
    drift.compare_versions(hosts)
    once = {name: list(h.checks) for name, h in hosts.items()}
    drift.compare_versions(hosts)
    assert {name: h.checks for name, h in hosts.items()} == once


def test_too_few_nodes_of_a_product_are_not_compared() -> None:
    hosts = {"node01": host("node01", versions()), "node02": host("node02", versions(**ODD))}
    drift.compare_versions(hosts)
    for judged in hosts.values():
        (only,) = judged.checks
        assert only["name"] == "fleet.versions" and only["ok"] is True
        assert "fewer than 3" in only["message"] and "versions not compared" in only["message"]
        # the setting that would let them be compared is named
        assert "thermal_gate_fleet_versions has no versions" in only["message"]


KNOWN = {"NVIDIA B300 SXM6 AC": {"vbios": "97.10.4A.00.02", "nic_firmware": ["40.44.1036"]}}


def test_drift_limited_to_two_nodes_judges_them_against_the_known_versions() -> None:
    """drift --limit node01,node02 with the inventory's thermal_gate_fleet_versions: the gate's judge."""
    hosts = {
        "node01": host("node01", versions(), KNOWN),
        "node02": host("node02", versions(**ODD), KNOWN),
    }
    drift.compare_versions(hosts)
    assert failed(hosts["node02"].checks) == {
        "fleet.versions[vbios]": ("97.10.4A.00.01", "97.10.4A.00.02"),
        "fleet.versions[nic_firmware]": ("40.44.1035", "40.44.1036"),
    }
    assert "the fleet's known 97.10.4A.00.02" in drift.drift_host(hosts["node02"]).message
    assert failed(hosts["node01"].checks) == {}
    # the driver and CUDA the setting leaves out are not judged, and say so
    driver = next(c for c in hosts["node01"].checks if c["name"] == "fleet.versions[driver]")
    assert driver["ok"] is True and "gives no GPU driver for it: not judged" in driver["message"]


@pytest.mark.parametrize(
    ("node02_known", "wrong"),
    [
        ({"NVIDIA B300 SXM6 AC": {"vbios": "97.10.4A.00.01"}}, "differs between node01 and node02"),
        ({"NVIDIA B300 SXM6 AC": {"cuda": 13.0}}, r"host node02: its gpufleet_known_versions: .*\[cuda\]"),
    ],
)
def test_known_versions_that_disagree_or_do_not_read_are_refused(node02_known: Any, wrong: str) -> None:
    hosts = {
        "node01": host("node01", versions(), KNOWN),
        "node02": host("node02", versions(**ODD), node02_known),
    }
    with pytest.raises(ValueError, match=wrong):
        drift.compare_versions(hosts)


@pytest.mark.parametrize(
    ("found", "wrong"),
    [
        ("580.95.05", "not a mapping"),
        (versions(vbios="97.10.4A.00.02"), "vbios is not a list of strings"),
        (versions(gpu_product=[16]), "gpu_product is not a list of strings"),
        (versions(driver=580), "driver is not a string"),
        (versions(gpu_count="16"), "gpu_count is not a whole number"),
        (versions(gpu_count=True), "gpu_count is not a whole number"),
    ],
)
def test_versions_of_another_shape_are_refused_naming_the_host(found: Any, wrong: str) -> None:
    hosts = fleet()
    hosts["node02"] = host("node02", found)
    with pytest.raises(ValueError, match=f"host node02: its gpufleet_versions: {wrong}"):
        drift.compare_versions(hosts)


def test_a_fix_keeps_the_comparison_it_cannot_change() -> None:
    """drift --fix reads no versions and its roles change none: a fixed odd node out stays failed."""
    hosts = fleet()
    drift.compare_versions(hosts)
    before = drift.drift_host(hosts["node03"])
    before.changes = [{"setting": "rdma_qos.pfc[ens21np0]", "from": [], "to": [3]}]
    fixed = drift._fixed_host(before, events.HostResult(name="node03"), 1)
    assert fixed.status == "failed"
    assert fixed.message.startswith("fixed in batch 1; no role changes its versions: node03: GPU VBIOS")
    assert failed(fixed.checks) == failed(before.checks)
    peer = drift.drift_host(hosts["node01"])
    peer.changes = before.changes
    fixed = drift._fixed_host(peer, events.HostResult(name="node01"), 1)
    assert (fixed.status, fixed.message) == ("changed", "fixed in batch 1")
    assert [c["name"] for c in fixed.checks] == [c["name"] for c in peer.checks]


def test_the_consoles_last_word_names_the_odd_node_as_the_report_does() -> None:
    hosts = fleet()
    collector = events.Collector()
    collector.hosts.update(hosts)
    console = io.StringIO()
    display = registry.console(console)
    display.run_started("drift.yml", read_only=True)
    display.run_finished(collector)
    said = {line.split()[0]: line.split()[1] for line in console.getvalue().splitlines()}
    assert said == {"leaf01": "ok", "node01": "ok", "node02": "ok", "node03": "failed", "node04": "ok"}
    report = {name: drift.drift_host(h).status for name, h in hosts.items()}
    assert report == said


def test_the_slices_of_one_job_are_compared_together(tmp_path: Path) -> None:
    """Two slices of two nodes each: each alone has too few peers; merged, node03 is the odd node out of
    four, exactly as a local drift of the four reports it."""
    leaf = (READ, {"changes": [], "checks": []})
    one = _artifacts(
        tmp_path / "one",
        {"leaf01": leaf, "node01": (COMPARE, res(versions())), "node02": (COMPARE, res(versions()))},
    )
    two = _artifacts(
        tmp_path / "two",
        {"leaf01": leaf, "node03": (COMPARE, res(versions(**ODD))), "node04": (COMPARE, res(versions()))},
    )
    merged = from_events.report_of([one, two], registry.COMMANDS)
    local = fleet()
    drift.compare_versions(local)
    expected: dict[str, HostReport] = {name: drift.drift_host(h) for name, h in local.items()}
    assert {n: (h.status, h.checks) for n, h in merged.hosts.items()} == {
        n: (h.status, h.checks) for n, h in expected.items()
    }
    assert merged.hosts["node03"].status == "failed"


def test_a_slice_with_versions_of_another_shape_is_refused(tmp_path: Path) -> None:
    odd = res(versions(gpu_count="sixteen"))
    run = _artifacts(tmp_path / "a", {"node01": (COMPARE, odd), "node02": (COMPARE, res(versions()))})
    with pytest.raises(from_events.EventsError, match="host node01: its gpufleet_versions: gpu_count"):
        from_events.report_of([run], registry.COMMANDS)
