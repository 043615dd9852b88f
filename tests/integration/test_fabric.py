"""The fabric end to end on three simulated nodes and their two leaves (subnet 127.0.94): each
switch and cabling fault named in drift, check and the gate with both ends of the link; switch_qos
fixing the leaf (check mode changes nothing, a second run nothing more); a leaf that is down or
whose certificate the named CA did not sign fails closed; no switch password in any report or log."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from gpufleet_sim import control, nvue_state
from gpufleet_sim.bmc import vault
from gpufleet_sim.fleet import Fleet

from tests.integration.conftest import run_on

LEAF = "leaf02"
# node01's second half of RoCE ports (mlx5_4..7) is on leaf02 swp1..4, node02's on swp5..8
NODE01_LINK = "node01:mlx5_4 -> leaf02:swp1"
SWITCH_FAULTS = {
    "switch-pfc-off": "fabric.switch_pfc",
    "switch-ecn-off": "fabric.switch_ecn",
    "switch-dscp-lossy": "fabric.switch_dscp",
    "switch-mtu-low": "fabric.switch_mtu",
}


@pytest.fixture(scope="module")
def fleet(fleet_factory) -> Fleet:
    started: Fleet = fleet_factory(nodes=3, subnet="127.0.94")
    return started


def failed(report: dict[str, Any], host: str) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in report["hosts"][host].get("checks", []) if not c["ok"]}


def fabric_failed(report: dict[str, Any], host: str) -> set[str]:
    return {name for name in failed(report, host) if name.startswith("fabric.")}


@contextlib.contextmanager
def leaf_down(fleet: Fleet, leaf: str) -> Iterator[None]:
    assert control.fault(fleet, leaf, "switch-down", clear=False) == ["switch-down"]
    try:
        yield
    finally:
        control.fault(fleet, leaf, "switch-down", clear=True)


def applied(fleet: Fleet, leaf: str) -> dict[str, Any]:
    tree: dict[str, Any] = nvue_state.load(fleet.leaf_state(leaf))["applied"]
    return tree


def test_each_fault_is_named_with_both_ends_in_drift_and_check(fleet: Fleet, tmp_path: Path) -> None:
    for fault in SWITCH_FAULTS:
        assert control.fault(fleet, LEAF, fault, clear=False) == [fault]
    assert control.fault(fleet, "node02", "cable-swapped", clear=False) == ["cable-swapped"]
    assert control.fault(fleet, "node03", "lldp-missing", clear=False) == ["lldp-missing"]

    code, drift = run_on(fleet, tmp_path / "drift", "drift")
    assert code == 1
    assert set(drift["hosts"]) == {"node01", "node02", "node03", "leaf01", "leaf02"}
    node01 = failed(drift, "node01")
    for check_name in SWITCH_FAULTS.values():
        link = node01[f"{check_name}[{NODE01_LINK}]"]
        assert "node01:mlx5_4" in link["message"] and "leaf02:swp1" in link["message"], link
    assert node01[f"fabric.switch_pfc[{NODE01_LINK}]"]["value"] == []
    assert node01[f"fabric.switch_pfc[{NODE01_LINK}]"]["limit"] == [3]
    assert node01[f"fabric.switch_mtu[{NODE01_LINK}]"]["value"] == 1500
    assert node01[f"fabric.switch_dscp[{NODE01_LINK}]"]["value"] == "priority 0"
    # the leaf on the healthy side judges nothing wrong
    assert not any("leaf01" in name for name in node01)
    # a swapped pair of cables: each port names what it found and what the plan says
    swapped = failed(drift, "node02")
    assert swapped["fabric.neighbor[mlx5_6]"]["value"] == "leaf02:swp8"
    assert swapped["fabric.neighbor[mlx5_6]"]["limit"] == "leaf02:swp7"
    assert swapped["fabric.neighbor[mlx5_7]"]["value"] == "leaf02:swp7"
    assert "crossed with mlx5_7 (swap the two cables)" in swapped["fabric.neighbor[mlx5_6]"]["message"]
    silent = failed(drift, "node03")["fabric.neighbor[mlx5_7]"]
    assert silent["value"] is None and "no LLDP neighbour" in silent["message"]
    # switch-side drift is reported as host-side drift is: {setting, from, to} on the leaf
    settings = {c["setting"]: (c["from"], c["to"]) for c in drift["hosts"][LEAF]["changes"]}
    assert settings["qos/pfc/default-global/switch-priority/3"] == (None, "present")
    assert settings["qos/congestion-control/default-global/traffic-class/3/ecn"] == ("disable", "enable")
    assert settings["qos/mapping/default-global/dscp/26/switch-priority"] == (0, 3)
    assert settings["interface/swp1/link/mtu"] == (1500, 9216)
    assert drift["hosts"]["leaf01"]["status"] == "ok"

    code, check = run_on(fleet, tmp_path / "check", "check")
    assert code == 1
    for node in ("node01", "node02", "node03"):
        assert fabric_failed(check, node) == fabric_failed(drift, node), node
    assert check["hosts"][LEAF]["changes"] == drift["hosts"][LEAF]["changes"]


def test_the_gate_blocks_every_node_naming_its_fabric_fault(fleet: Fleet, tmp_path: Path, capfd) -> None:
    """The first test's faults still on (leaf02's four, node02's swapped cables, node03's silent port)
    and leaf01 down: every node is blocked before its burn-in, each naming its faults."""
    with leaf_down(fleet, "leaf01"):
        code, gated = run_on(fleet, tmp_path / "gate", "gate", "--burn-in-seconds", "3")
    assert code == 1
    for node in ("node01", "node02", "node03"):
        assert gated["hosts"][node]["status"] == "blocked", gated["hosts"][node]
        assert "fabric.switch_read[leaf01]" in fabric_failed(gated, node)
    for check_name in SWITCH_FAULTS.values():
        assert f"{check_name}[{NODE01_LINK}]" in fabric_failed(gated, "node01")
    assert {"fabric.neighbor[mlx5_6]", "fabric.neighbor[mlx5_7]"} <= fabric_failed(gated, "node02")
    assert "fabric.neighbor[mlx5_7]" in fabric_failed(gated, "node03")
    assert gated["hosts"]["leaf01"]["status"] != "ok"
    # leaf02's profile drifted (the switch faults): the gate says so as drift does, not ok
    assert gated["hosts"][LEAF]["status"] == "drifted"
    assert {c["setting"] for c in gated["hosts"][LEAF]["changes"]} >= {"interface/swp1/link/mtu"}
    # no switch password anywhere the runs wrote or printed
    printed = capfd.readouterr()
    secrets = [fleet.switch_credentials(leaf)[1] for leaf in ("leaf01", "leaf02")]
    # every report of this module's tests so far (their tmp_paths are siblings)
    reports = [p for d in tmp_path.parent.glob("test_*") for p in d.rglob("*") if p.is_file()]
    written = "".join(p.read_text(errors="replace") for p in reports)
    assert len(reports) >= 6
    for secret in secrets:
        assert secret not in written and secret not in printed.out and secret not in printed.err


def test_switch_qos_fixes_the_leaf_once_and_check_mode_changes_nothing(fleet: Fleet, tmp_path: Path) -> None:
    before = applied(fleet, LEAF)
    code, checked = run_on(fleet, tmp_path / "switch-check", "switch", "--check")
    assert code == 1
    assert checked["hosts"][LEAF]["status"] == "drifted"
    assert applied(fleet, LEAF) == before

    code, fixed = run_on(fleet, tmp_path / "switch", "switch")
    assert code == 0, fixed["hosts"][LEAF]
    assert fixed["hosts"][LEAF]["status"] == "changed"
    assert {c["setting"] for c in fixed["hosts"][LEAF]["changes"]} == {
        c["setting"] for c in checked["hosts"][LEAF]["changes"]
    }
    assert fixed["hosts"]["leaf01"]["status"] == "ok"
    after = applied(fleet, LEAF)
    assert "3" in after["qos"]["pfc"]["default-global"]["switch-priority"]
    assert after["qos"]["congestion-control"]["default-global"]["traffic-class"]["3"]["ecn"] == "enable"

    code, again = run_on(fleet, tmp_path / "switch-again", "switch")
    assert code == 0
    assert again["hosts"][LEAF]["status"] == "ok" and again["hosts"][LEAF]["changes"] == []

    code, drift = run_on(fleet, tmp_path / "drift", "drift")
    assert not any(n.startswith("fabric.switch") for n in fabric_failed(drift, "node01"))
    assert drift["hosts"][LEAF]["changes"] == []


def test_a_leaf_that_is_down_or_untrusted_fails_closed(fleet: Fleet, tmp_path: Path) -> None:
    with leaf_down(fleet, "leaf01"):
        code, down = run_on(fleet, tmp_path / "down", "drift", "--limit", "node01")
    assert code == 1
    assert failed(down, "leaf01")["switch.nvue[leaf01]"]["value"] == "connection"
    unread = failed(down, "node01")["fabric.switch_read[leaf01]"]
    assert "leaf01" in unread["message"]
    assert not any("leaf01" in n for n in failed(down, "node01") if n != "fabric.switch_read[leaf01]")

    # the BMCs' CA did not sign the leaves' certificates: refused, never read
    inventory = yaml.load(fleet.inventory_path.read_text(), Loader=vault.InventoryLoader)
    inventory["all"]["children"]["leaf_switches"]["vars"]["gpufleet_switch_ca_path"] = str(
        fleet.bmc_dir / "ca.pem"
    )
    wrong = tmp_path / "wrong-ca.yml"
    wrong.write_text(yaml.dump(inventory, Dumper=vault.InventoryDumper))
    code, untrusted = run_on(fleet, tmp_path / "wrong-ca", "drift", "--limit", "node01", inventory=wrong)
    assert code == 1
    refused = failed(untrusted, "leaf02")["switch.nvue[leaf02]"]
    assert refused["value"] == "tls" and "certificate" in refused["message"], refused
    assert "fabric.switch_read[leaf02]" in failed(untrusted, "node01")


@pytest.mark.parametrize(
    ("fault", "symptom"),
    [("switch-pfc-off", "fabric.retransmits"), ("switch-ecn-off", "fabric.ecn_loop")],
)
def test_the_all_reduce_names_its_low_figure_and_the_leaf_fault_together(
    fleet: Fleet, tmp_path: Path, fault: str, symptom: str
) -> None:
    """The switch side cannot be read here (an inventory without leaf_switches: a network team's
    leaves), so only the load shows it: PFC or ECN off on leaf02. The gate's all-reduce, the first load
    the fabric carries, falls below its floor (the simulator's ring crosses the baseboards over RoCE),
    and the RoCE counters read around it name node01's leaf02 ports (retransmits, or pauses with no ECN
    mark) in the same message; its leaf01 ports pass. Blocked before any instance starts."""
    inventory = yaml.load(fleet.inventory_path.read_text(), Loader=vault.InventoryLoader)
    del inventory["all"]["children"]["leaf_switches"]
    unmanaged = fleet.inventory_path.with_name("no-leaves.yml")
    unmanaged.write_text(yaml.dump(inventory, Dumper=vault.InventoryDumper))
    # the first test's faults are still listed (switch_qos fixed them on the leaf): start afresh
    control.fault(fleet, LEAF, None, clear=True)
    assert control.fault(fleet, LEAF, fault, clear=False) == [fault]
    try:
        code, gated = run_on(
            fleet,
            tmp_path / "gate",
            "gate",
            "--limit",
            "node01",
            "--burn-in-seconds",
            "5",
            inventory=unmanaged,
        )
    finally:
        control.fault(fleet, LEAF, None, clear=True)
    assert code == 1
    host = gated["hosts"]["node01"]
    assert host["status"] == "blocked", host
    nccl = failed(gated, "node01")["health.nccl_busbw"]
    assert nccl["value"] < nccl["limit"], nccl
    on_leaf02 = {f"{symptom}[mlx5_{i}]" for i in range(4, 8)}
    assert on_leaf02 <= fabric_failed(gated, "node01"), fabric_failed(gated, "node01")
    # each port named with its leaf and port (node01's RoCE ports 4-7 are cabled to leaf02:swp1-4)
    ports = ", ".join(f"mlx5_{i} (leaf02:swp{i - 3})" for i in range(4, 8))
    assert f"{symptom}[{ports}]" in nccl["message"], nccl["message"]
    assert "gpufleet switch --check --limit leaf02" in nccl["message"], nccl["message"]
    assert not any(f"[mlx5_{i}]" in name for name in fabric_failed(gated, "node01") for i in range(4))
    assert not any(c["name"].startswith("burn_in.") for c in host["checks"])
