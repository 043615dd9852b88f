"""A node gated alone, or with one peer, is judged against the fleet's known versions (subnet 127.0.58).

`gate --limit` on the nodes back from maintenance leaves fleet.versions fewer than three peers to
compare: node02's VBIOS and NIC firmware one version behind (firmware-mismatch) passed unjudged. With
thermal_gate_fleet_versions set, the gate blocks node02 naming the known version, and admits node01;
a known-versions entry of the wrong shape is refused before anything changes (exit 2), naming it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from gpufleet_sim import control
from gpufleet_sim.fleet import Fleet

from gpufleet import cli
from tests.integration.conftest import node_ssh, run_on
from tests.unit.sim_versions import versions

SETTING = "thermal_gate_fleet_versions"


def _known() -> dict[str, Any]:
    """The fleet's versions as an operator writes them: those of a default simulated node."""
    default = versions()
    (product,) = default["gpu_product"]
    return {product: {field: default[field] for field in ("driver", "cuda", "vbios", "nic_firmware")}}


def _set_known(fleet: Fleet, known: Any) -> None:
    host_vars = fleet.root / "host_vars"
    host_vars.mkdir(exist_ok=True)
    for name in ("node01", "node02"):
        (host_vars / f"{name}.yml").write_text(yaml.safe_dump({SETTING: known}), encoding="utf-8")


@pytest.fixture(scope="module")
def fleet(fleet_factory: Any) -> Fleet:
    made: Fleet = fleet_factory(nodes=2, subnet="127.0.58")
    assert control.fault(made, "node02", "firmware-mismatch", clear=False) == ["firmware-mismatch"]
    return made


@pytest.fixture(scope="module")
def refused(fleet: Fleet, tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict[str, Any]]:
    """A CUDA version written as a YAML number: one gate run on node02 alone."""
    product = next(iter(_known()))
    _set_known(fleet, {product: {"cuda": 13.0}})
    return run_on(fleet, tmp_path_factory.mktemp("known-bad"), "gate", "--limit", "node02")


@pytest.fixture(scope="module")
def gated(fleet: Fleet, refused: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict[str, Any]]:
    """The right known versions: one gate run on node01 and node02, two nodes of a product."""
    _set_known(fleet, _known())
    report_dir: Path = tmp_path_factory.mktemp("known")
    return run_on(fleet, report_dir, "gate", "--limit", "node01,node02", "--burn-in-seconds", "11")


def _checks(host: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in host["checks"]}


def test_a_bad_known_version_is_refused_naming_the_entry(fleet: Fleet, refused: Any) -> None:
    code, report = refused
    assert code == cli.EXIT_USAGE
    host = report["hosts"]["node02"]
    # refused, an operator's input error (the word for its status is the gate's: not ok)
    assert host["status"] != "ok" and host["configuration_error"] is True
    assert f"{SETTING}[" in host["message"] and "[cuda] must be a version string" in host["message"]
    assert "quote it" in host["message"], host["message"]
    # refused before the drain: never drained, nothing changed
    assert host["changes"] == [] and "drained" not in host["message"]
    # the drain role's record of a node it took out of service (roles/drain, drain_record_path)
    assert node_ssh(fleet, "127.0.58.3", "test -e /var/lib/gpufleet/drained", check=False).returncode == 1


def test_the_node_with_a_changed_vbios_is_blocked_by_the_known_versions(gated: Any) -> None:
    code, report = gated
    assert code != 0
    node02 = report["hosts"]["node02"]
    assert node02["status"] == "blocked", node02["message"]
    checks = _checks(node02)
    known = _known()[next(iter(_known()))]
    vbios = checks["fleet.versions[vbios]"]
    assert (vbios["ok"], vbios["limit"]) == (False, known["vbios"][0]) and vbios["value"] != known["vbios"][0]
    assert "the fleet's known" in vbios["message"] and SETTING in vbios["message"]
    assert "fewer than 3" in vbios["message"]
    assert checks["fleet.versions[nic_firmware]"]["ok"] is False
    assert checks["fleet.versions[driver]"]["ok"] and checks["fleet.versions[cuda]"]["ok"]


def test_its_peer_with_the_known_versions_is_admitted(gated: Any) -> None:
    _, report = gated
    node01 = report["hosts"]["node01"]
    versions_checks = {n: c for n, c in _checks(node01).items() if n.startswith("fleet.versions")}
    assert sorted(versions_checks) == [
        f"fleet.versions[{f}]" for f in ("cuda", "driver", "nic_firmware", "vbios")
    ]
    assert all(c["ok"] for c in versions_checks.values())
    assert node01["status"] == "ok", [c for c in node01["checks"] if not c["ok"]]


def test_drift_limited_to_the_node_judges_it_against_the_same_known_versions(
    fleet: Fleet, gated: Any, tmp_path: Path
) -> None:
    """drift --limit node02: node_facts returns the inventory's known versions, the gate's judge uses them."""
    _, report = run_on(fleet, tmp_path, "drift", "--limit", "node02")
    vbios = _checks(report["hosts"]["node02"])["fleet.versions[vbios]"]
    assert vbios["ok"] is False and "the fleet's known" in vbios["message"] and SETTING in vbios["message"]
