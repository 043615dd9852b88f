"""`gpufleet provision --tags rdma_link,rdma_qos` on a simulated fleet: the RDMA faults fixed, idempotent,
exact in check mode, kept across a reboot by the boot units; a down link is a named failed check;
bad inputs are refused before anything changes.

Three b300-16 nodes: node01 has pfc-off, ecn-off and roce-v1, node02 is clean (but has no boot
units yet), node03 has a pulled cable (link-down).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.rdma import rdma_read
from gpufleet_sim import control, state
from gpufleet_sim.fleet import Fleet

from gpufleet import cli
from tests.integration.conftest import node_hosts

NETDEVS = ["ens21np0", "ens38np0", "ens55np0", "ens72np0", "ens149np0", "ens166np0", "ens183np0", "ens200np0"]
IBDEVS = [f"mlx5_{i}" for i in range(8)]
UNITS = ("gpufleet-rdma-link.service", "gpufleet-rdma-qos.service")
TAGS = "rdma_link,rdma_qos"
# What provision must change on node01: RoCE v2 on every port, PFC and ECN (both points) on 3.
EXPECTED_CHANGES = sorted(
    [(f"rdma_link.roce_mode[{i}]", "v1", "v2") for i in IBDEVS]
    + [(f"rdma_qos.{s}[{n}]", [], [3]) for n in NETDEVS for s in ("pfc", "ecn_np", "ecn_rp")]
)


@pytest.fixture(scope="module")
def fleet(fleet_factory: Any) -> Fleet:
    started: Fleet = fleet_factory(nodes=3, subnet="127.0.13")
    for fault in ("pfc-off", "ecn-off", "roce-v1"):
        control.fault(started, "node01", fault, clear=False)
    control.fault(started, "node03", "link-down", clear=False)
    return started


def provision(fleet: Fleet, report_dir: Path, *extra: str, inventory: Path | None = None) -> tuple[int, dict]:
    code = cli.main(
        [
            "provision",
            "--inventory",
            str(inventory or fleet.inventory_path),
            "--tags",
            TAGS,
            "--report-dir",
            str(report_dir),
            # the leaves' vaulted passwords (every provision reads the leaf switches)
            "--vault-password-file",
            str(fleet.vault_password_file),
            *extra,
        ]
    )
    return code, json.loads((report_dir / "report.json").read_text())


def changes(host: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    return sorted((c["setting"], c["from"], c["to"]) for c in host["changes"])


BOOT_FILES = {
    "rdma_link": ("gpufleet/rdma-link.sh", "systemd/system/gpufleet-rdma-link.service"),
    "rdma_qos": ("gpufleet/rdma-qos.sh", "systemd/system/gpufleet-rdma-qos.service"),
}


def first_boot_files(
    fleet: Fleet, name: str, roles: tuple[str, ...] = ("rdma_link", "rdma_qos"), enabled: bool = False
) -> list[tuple[str, Any, Any]]:
    """A first run's changes to a node's boot files: each from none to what the node now holds, and
    (with enabled) each unit enabled."""
    upper = fleet.root / "nodes" / name / "etc-upper"
    found = []
    for role in roles:
        for path in BOOT_FILES[role]:
            digest = "sha256:" + hashlib.sha256((upper / path).read_bytes()).hexdigest()[:16]
            found.append((f"{role}.boot_file[/etc/{path}]", None, digest))
        if enabled:
            found.append((f"{role}.boot_unit_enabled[{Path(BOOT_FILES[role][1]).name}]", False, True))
    return found


def node_view(fleet: Fleet, name: str) -> dict[str, Any]:
    """What the node's NICs run, read from its state and sysfs as its tools and the kernel show them."""
    root = fleet.root / "nodes" / name
    nics = state.load(root)["nics"]
    return {
        "trust": {n["trust"] for n in nics},
        "pfc": {tuple(n["pfc"]) for n in nics},
        "ecn": [rdma_read.read_ecn(n, str(root)) for n in NETDEVS],
        "roce_mode": {rdma_read.read_roce_mode(i, 1, str(root)) for i in IBDEVS},
        "roce_tos": {rdma_read.read_roce_tos(i, 1, str(root)) for i in IBDEVS},
        "mtu": {rdma_read.read_netdev(n, str(root))["mtu"] for n in NETDEVS},
    }


def units(fleet: Fleet, name: str) -> dict[str, Any]:
    root = fleet.root / "nodes" / name
    installed = {u for u in UNITS if (root / "etc-upper" / "systemd" / "system" / u).is_file()}
    known = state.load(root).get("units", {})
    return {"installed": installed, "enabled": {u for u in UNITS if known.get(u, {}).get("enabled")}}


TUNED_ECN = {"np": [p == 3 for p in range(8)], "rp": [p == 3 for p in range(8)], "cnp_dscp": 48}
TUNED = {
    "trust": {"dscp"},
    "pfc": {(0, 0, 0, 1, 0, 0, 0, 0)},
    "ecn": [TUNED_ECN] * 8,
    "roce_mode": {"v2"},
    "roce_tos": {106},
    "mtu": {4200},
}


def test_check_apply_apply_check(fleet: Fleet, tmp_path: Path) -> None:
    faulted = node_view(fleet, "node01")
    assert faulted["pfc"] == {(0,) * 8} and faulted["roce_mode"] == {"v1"}

    # check mode: exactly the changes a run makes (its boot files named once written, below), nothing written
    code, check = provision(fleet, tmp_path / "check", "--check", "--diff")
    hosts = check["hosts"]
    assert code == 1
    assert hosts["node01"]["status"] == "drifted"
    assert hosts["node02"]["status"] == "drifted"  # its boot units are missing
    assert node_view(fleet, "node01") == faulted
    assert units(fleet, "node01") == units(fleet, "node02") == {"installed": set(), "enabled": set()}

    # apply: node01 fixed, both clean nodes get their boot units; node03's cable is not a change
    code, report = provision(fleet, tmp_path / "apply")
    hosts = report["hosts"]
    assert code == 1  # node03 is not ready
    assert hosts["node01"]["status"] == "changed"
    written = first_boot_files(fleet, "node01", enabled=True)
    assert changes(hosts["node01"]) == sorted(EXPECTED_CHANGES + written)
    assert hosts["node02"]["status"] == "changed"
    assert changes(hosts["node02"]) == sorted(first_boot_files(fleet, "node02", enabled=True))
    # check mode named the same changes, the units to enable included
    assert changes(check["hosts"]["node01"]) == sorted(EXPECTED_CHANGES + written)
    assert changes(check["hosts"]["node02"]) == changes(hosts["node02"])
    for name in ("node01", "node02"):
        assert node_view(fleet, name) == TUNED
        assert units(fleet, name) == {"installed": set(UNITS), "enabled": set(UNITS)}
        assert all(c["ok"] for c in hosts[name]["checks"])
    boot = (fleet.root / "nodes" / "node01" / "etc-upper" / "gpufleet" / "rdma-qos.sh").read_text()
    assert "/usr/local/sbin/mlnx_qos -i ens21np0 --trust dscp --pfc 0,0,0,1,0,0,0,0 || rc=1" in boot

    down = hosts["node03"]
    assert down["status"] == "failed"
    # rdma_link wrote its boot files before its link check stopped the node; rdma_qos never ran
    assert changes(down) == sorted(first_boot_files(fleet, "node03", ("rdma_link",), enabled=True))
    assert [(c["name"], c["value"]) for c in down["checks"] if not c["ok"]] == [
        ("rdma_link.link_state[mlx5_7]", "DOWN")
    ]
    assert "not ready: mlx5_7 (ens200np0) link is DOWN" in down["message"]
    assert "Cable is unplugged" in down["message"]

    # again: nothing to do
    code, report = provision(fleet, tmp_path / "again")
    for name in ("node01", "node02"):
        assert report["hosts"][name]["status"] == "ok", report["hosts"][name]
        assert report["hosts"][name]["changes"] == []
    assert report["hosts"]["node03"]["status"] == "failed"

    # and check mode finds no drift
    code, report = provision(fleet, tmp_path / "check-again", "--check", "--limit", "node01,node02")
    assert code == 0
    assert {h["status"] for h in report["hosts"].values()} == {"ok"}


def test_boot_units_restore_the_settings_after_a_reboot(fleet: Fleet) -> None:
    # runs after the apply above; a reboot drops every runtime setting and runs the enabled units
    assert units(fleet, "node01")["enabled"] == set(UNITS)
    fleet.reboot("node01")
    assert node_view(fleet, "node01") == TUNED
    known = state.load(fleet.root / "nodes" / "node01")["units"]
    assert {u: known[u]["result"] for u in UNITS} == dict.fromkeys(UNITS, "success")


def test_bad_inputs_are_refused_before_any_change(fleet: Fleet, tmp_path: Path) -> None:
    control.fault(fleet, "node03", None, clear=True)
    control.fault(fleet, "node01", "pfc-off", clear=False)
    control.fault(fleet, "node02", "pfc-off", clear=False)
    control.fault(fleet, "node03", "roce-v1", clear=False)
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(fleet.inventory_path.read_text())
    (tmp_path / "group_vars").symlink_to(fleet.root / "group_vars")
    host_vars = tmp_path / "host_vars"
    host_vars.mkdir()
    (host_vars / "node01.yml").write_text("rdma_qos_interfaces: [ens21np0, eth9]\n")
    (host_vars / "node02.yml").write_text("rdma_qos_pfc_priorities: [3, 9]\n")
    (host_vars / "node03.yml").write_text("rdma_link_ports: [mlx5_0, mlx5_9]\n")
    before = {name: node_view(fleet, name) for name in ("node01", "node02", "node03")}

    code, report = provision(fleet, tmp_path / "report", inventory=inventory)
    hosts = node_hosts(report)
    assert code == 2  # configuration: each node was refused for its inputs
    assert {name: h["status"] for name, h in hosts.items()} == dict.fromkeys(before, "failed")
    assert {name: h.get("configuration_error") for name, h in hosts.items()} == dict.fromkeys(before, True)
    assert "interfaces: eth9 is not an mlx5 RoCE interface on this node" in hosts["node01"]["message"]
    assert (
        "rdma_qos_pfc_priorities is [3, 9]: 9 is not a priority; priorities are 0..7"
        in (hosts["node02"]["message"])
    )
    assert (
        "ports: mlx5_9 are not mlx5 RDMA devices or their netdevs on this node" in hosts["node03"]["message"]
    )
    for name, view in before.items():
        assert hosts[name]["changes"] == []
        assert node_view(fleet, name) == view


# Values only a role's argument spec refuses (its preflight asserts let them through). Were they checked
# only by each role's main entry point, rdma_link (all three nodes) and rdma_qos (node02, node03) would
# already have changed the node: its boot units, its PFC or RoCE mode.
SPEC_ONLY = {
    "node01": ("rdma_qos", "rdma_qos_trust", "lossless", "must be one of: dscp, pcp"),
    "node02": ("gpu_power", "gpu_power_persistence", "sometimes", "is not a valid boolean"),
    "node03": ("nccl_topology", "nccl_topology_gdr", "maybe", "is not a valid boolean"),
}


def test_argument_spec_refuses_bad_types_in_the_preflight_play(fleet: Fleet, tmp_path: Path) -> None:
    """provision.yml's first play includes each role's tasks_from: preflight, so each role's preflight
    entry point (its argument spec) is validated there: a value of the wrong type or outside its
    choices stops the node before rdma_link or rdma_qos has fixed anything on it."""
    for name, fault in (("node01", "pfc-off"), ("node02", "pfc-off"), ("node03", "roce-v1")):
        control.fault(fleet, name, None, clear=True)
        control.fault(fleet, name, fault, clear=False)
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(fleet.inventory_path.read_text())
    (tmp_path / "group_vars").symlink_to(fleet.root / "group_vars")
    host_vars = tmp_path / "host_vars"
    host_vars.mkdir()
    for name, (_, setting, value, _) in SPEC_ONLY.items():
        (host_vars / f"{name}.yml").write_text(f"{setting}: {value}\n")
    before = {name: (node_view(fleet, name), units(fleet, name)) for name in SPEC_ONLY}

    code, report = provision(fleet, tmp_path / "report", inventory=inventory)
    hosts = node_hosts(report)
    assert code == 2  # configuration
    for name, (role, setting, value, why) in SPEC_ONLY.items():
        host = hosts[name]
        assert host["status"] == "failed", host
        # the preflight entry point's validation task, not main's (which only runs in a later play)
        assert f"gpufleet.node.{role} : Validating arguments against arg spec 'preflight'" in host["message"]
        assert all(s in host["message"] for s in (setting, why, value)), host["message"]
        assert host["changes"] == [] and host["checks"] == []
        assert (node_view(fleet, name), units(fleet, name)) == before[name]
    assert before["node01"][0]["pfc"] == {(0,) * 8} and before["node03"][0]["roce_mode"] == {"v1"}
