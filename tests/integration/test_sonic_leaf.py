"""A SONiC leaf beside a Cumulus one (subnet 127.0.48: molecule's inference_service has 127.0.41 and may run
at once): one simulated node, its first half of RoCE
ports on leaf01 (NVUE over HTTPS), its second half on leaf02 (SONiC: gpufleet_switch_os sonic, read
with sonic-cfggen -d --print-data over real SSH). PFC off on both leaves is named by drift and check
with the same check, value and limit on both leaves' links; each leaf's drift names its own settings;
`gpufleet switch` fixes the NVUE leaf and refuses to change the SONiC one, which is left as it was."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gpufleet_sim import control, nvue_state
from gpufleet_sim.fleet import Fleet, FleetConfig

from tests.integration.conftest import leftovers, run_on

NVUE_LINK = "node01:mlx5_0 -> leaf01:swp1"
SONIC_LINK = "node01:mlx5_4 -> leaf02:swp1"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    root = tmp_path_factory.mktemp("sim")
    started = Fleet(root)
    started.up(FleetConfig(nodes=1, subnet="127.0.48", sonic_leaves=("leaf02",)))
    try:
        yield started
    finally:
        started.stop()
        assert leftovers(root) == [], "a simulated node or leaf outlived its fleet"
        shutil.rmtree(root, ignore_errors=True)


def failed(report: dict[str, Any], host: str) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in report["hosts"][host].get("checks", []) if not c["ok"]}


def pfc_listed(fleet: Fleet, leaf: str) -> bool:
    pfc = nvue_state.load(fleet.leaf_state(leaf))["applied"]["qos"]["pfc"]["default-global"]
    return str(nvue_state.ROCE_PRIORITY) in pfc["switch-priority"]


def test_pfc_off_on_a_sonic_leaf_is_named_as_on_an_nvue_leaf(fleet: Fleet, tmp_path: Path) -> None:
    for leaf in ("leaf01", "leaf02"):
        assert control.fault(fleet, leaf, "switch-pfc-off", clear=False) == ["switch-pfc-off"]

    code, drift = run_on(fleet, tmp_path / "drift", "drift")
    assert code == 1
    node = failed(drift, "node01")
    assert {name.split("[")[0] for name in node} == {"fabric.switch_pfc"}, node
    nvue, sonic = node[f"fabric.switch_pfc[{NVUE_LINK}]"], node[f"fabric.switch_pfc[{SONIC_LINK}]"]
    assert (sonic["value"], sonic["limit"]) == (nvue["value"], nvue["limit"]) == ([], [3])
    assert sonic["message"] == nvue["message"].replace(NVUE_LINK, SONIC_LINK)
    # every port of the node's half on leaf02 is named, each by the port LLDP hears (the alias swpN)
    assert {n for n in node if "leaf02" in n} == {
        f"fabric.switch_pfc[node01:mlx5_{i} -> leaf02:swp{i - 3}]" for i in (4, 5, 6, 7)
    }
    # each leaf's drift in its own terms: NVUE's path, SONiC's CONFIG_DB field
    nvue_changes = {c["setting"]: (c["from"], c["to"]) for c in drift["hosts"]["leaf01"]["changes"]}
    sonic_changes = {c["setting"]: (c["from"], c["to"]) for c in drift["hosts"]["leaf02"]["changes"]}
    assert nvue_changes == {"qos/pfc/default-global/switch-priority/3": (None, "present")}
    assert sonic_changes["PORT_QOS_MAP|Ethernet0 pfc_enable"] == ("", "3")
    assert set(sonic_changes) == {f"PORT_QOS_MAP|Ethernet{8 * n} pfc_enable" for n in range(64)}
    assert drift["hosts"]["leaf01"]["status"] == drift["hosts"]["leaf02"]["status"] == "drifted"

    code, check = run_on(fleet, tmp_path / "check", "check")
    assert code == 1
    assert set(failed(check, "node01")) == set(node)
    assert check["hosts"]["leaf02"]["changes"] == drift["hosts"]["leaf02"]["changes"]


def test_switch_fixes_the_nvue_leaf_and_refuses_to_change_the_sonic_one(fleet: Fleet, tmp_path: Path) -> None:
    """The first test's faults still on."""
    code, switched = run_on(fleet, tmp_path / "switch", "switch")
    assert code != 0
    assert switched["hosts"]["leaf01"]["status"] == "changed"
    assert pfc_listed(fleet, "leaf01")
    sonic = switched["hosts"]["leaf02"]
    assert sonic["status"] == "failed", sonic
    said = " ".join(str(m) for m in (sonic.get("message"), sonic.get("messages")) if m)
    assert "leaf02 runs SONiC (gpufleet_switch_os: sonic), which gpufleet reads and never changes" in said
    assert "PORT_QOS_MAP|Ethernet0 pfc_enable" in said
    assert not pfc_listed(fleet, "leaf02")  # left as it was

    control.fault(fleet, "leaf02", "switch-pfc-off", clear=True)
    _code, drift = run_on(fleet, tmp_path / "drift", "drift")  # node01 itself was never provisioned
    assert drift["hosts"]["leaf02"]["status"] == "ok" and drift["hosts"]["leaf02"]["changes"] == []
    assert drift["hosts"]["leaf01"]["status"] == "ok"
    assert failed(drift, "node01") == {}
    # a SONiC leaf that is down fails the node's links on it closed, named by its own check
    assert control.fault(fleet, "leaf02", "switch-down", clear=False) == ["switch-down"]
    try:
        code, drift = run_on(fleet, tmp_path / "down", "drift")
    finally:
        control.fault(fleet, "leaf02", "switch-down", clear=True)
    assert code == 1
    assert "fabric.switch_read[leaf02]" in failed(drift, "node01")
    assert "switch.sonic[leaf02]" in failed(drift, "leaf02")
