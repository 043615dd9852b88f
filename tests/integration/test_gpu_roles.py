"""gpu_power, nccl_topology and gpu_pinning on a simulated fleet, through `gpufleet provision`.

One fleet of three b300-16 nodes: provisioned once, then faulted and checked (exact changes,
nothing written), fixed, re-run (no change), checked again; bus-order swaps need nothing;
impossible targets are refused before any change; the boot unit restores limits after a reboot.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from gpufleet_sim import control, state
from gpufleet_sim.fleet import Fleet

from gpufleet import cli

TAGS = "gpu_power,nccl_topology,gpu_pinning"
TOPO = Path("nccl/topo.xml")


@pytest.fixture(scope="module")
def fleet(fleet_factory) -> Fleet:
    started: Fleet = fleet_factory(nodes=3, subnet="127.0.24")
    return started


def provision(fleet: Fleet, report_dir: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    inventory = str(fleet.inventory_path)
    argv = ["provision", "--inventory", inventory, "--tags", TAGS, "--report-dir", str(report_dir)]
    # the leaves' and BMCs' vaulted passwords (every provision reads the leaf switches)
    argv += ["--vault-password-file", str(fleet.vault_password_file), *extra]
    code = cli.main(argv)
    return code, json.loads((report_dir / "report.json").read_text())


def node_dir(fleet: Fleet, name: str) -> Path:
    return fleet.root / "nodes" / name


def etc(fleet: Fleet, name: str) -> dict[str, bytes]:
    """Every file of the node's own /etc (the overlay upper dir)."""
    upper = node_dir(fleet, name) / "etc-upper"
    return {str(p.relative_to(upper)): p.read_bytes() for p in sorted(upper.rglob("*")) if p.is_file()}


def gpus(fleet: Fleet, name: str) -> list[dict[str, Any]]:
    return list(state.load(node_dir(fleet, name))["gpus"])


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()[:16]


@pytest.fixture(scope="module")
def provisioned(fleet: Fleet, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, bytes]]:
    code, report = provision(fleet, tmp_path_factory.mktemp("baseline"))
    assert code == 0, report
    # every node changed; the leaf switches are read, never changed, by provision
    assert {n: h["status"] for n, h in report["hosts"].items() if n.startswith("node")} == dict.fromkeys(
        ("node01", "node02", "node03"), "changed"
    )
    assert {h["status"] for n, h in report["hosts"].items() if n.startswith("leaf")} == {"ok"}
    return {name: etc(fleet, name) for name in ("node01", "node02", "node03")}


def test_faulted_node_check_apply_rerun_check(fleet: Fleet, provisioned, tmp_path: Path) -> None:
    good_topo = provisioned["node02"][str(TOPO)]
    for fault in ("power-capped", "persistence-off", "stale-nccl-topo"):
        control.fault(fleet, "node02", fault, clear=False)
    stale = etc(fleet, "node02")
    before = state.load(node_dir(fleet, "node02"))
    uuids = [g["uuid"] for g in state.present_gpus(before)]
    expected = [
        {"setting": "gpu_power.nvidia_persistenced.enabled", "from": False, "to": True},
        {"setting": "gpu_power.nvidia_persistenced.active", "from": False, "to": True},
        *({"setting": f"gpu_power.persistence_mode[{u}]", "from": False, "to": True} for u in uuids),
        *({"setting": f"gpu_power.enforced_limit_w[{u}]", "from": 1100.0, "to": 1400.0} for u in uuids),
        {"setting": "nccl_topology.file", "from": digest(stale[str(TOPO)]), "to": digest(good_topo)},
    ]

    # check mode: the exact changes, on the faulted node only, and nothing written
    code, report = provision(fleet, tmp_path / "check", "--check", "--diff")
    assert code == 1
    hosts = report["hosts"]
    assert (hosts["node01"]["status"], hosts["node03"]["status"]) == ("ok", "ok")
    assert hosts["node01"]["changes"] == [] and hosts["node03"]["changes"] == []
    assert hosts["node02"]["status"] == "drifted"
    assert hosts["node02"]["changes"] == expected
    assert "the rack's power budget" in hosts["node02"]["message"]
    assert (
        "/etc/nccl/topo.xml was stale: GPU 0000:c7:00.0 (NUMA 1) is on the node but not in the file"
        in (hosts["node02"]["message"])
    )
    assert etc(fleet, "node02") == stale
    assert state.load(node_dir(fleet, "node02")) == before

    # apply: the same changes, and the node is as it must be
    code, report = provision(fleet, tmp_path / "apply")
    assert code == 0
    assert report["hosts"]["node02"]["status"] == "changed"
    # the run that raised the capped limits says what may have capped them, as check mode does
    assert "the rack's power budget" in report["hosts"]["node02"]["message"]
    assert report["hosts"]["node02"]["changes"] == expected
    assert all(c["ok"] for c in report["hosts"]["node02"]["checks"])
    checks = {c["name"] for c in report["hosts"]["node02"]["checks"]}
    assert {"nccl_topology.gpus", "nccl_topology.nics", f"gpu_power.enforced_limit_w[{uuids[0]}]"} <= checks
    after = state.load(node_dir(fleet, "node02"))
    assert {(g["power"]["enforced_limit_w"], g["persistence_mode"]) for g in after["gpus"]} == {
        (1400.0, True)
    }
    assert after["units"]["nvidia-persistenced.service"]["enabled"] is True
    assert after["units"]["nvidia-persistenced.service"]["active"] is True
    assert etc(fleet, "node02")[str(TOPO)] == good_topo

    # a second run changes nothing anywhere; check mode agrees
    for extra in ((), ("--check",)):
        code, report = provision(fleet, tmp_path / ("again" + "".join(extra)), *extra)
        assert code == 0
        for name, host in report["hosts"].items():
            assert (host["status"], host["changes"]) == ("ok", []), name
    control.fault(fleet, "node02", None, clear=True)
    assert etc(fleet, "node02") == provisioned["node02"]


def test_bus_order_swap_needs_no_change(fleet: Fleet, provisioned, tmp_path: Path) -> None:
    control.fault(fleet, "node03", "bus-order-swapped", clear=False)
    try:
        swapped = state.load(node_dir(fleet, "node03"))
        code, report = provision(fleet, tmp_path, "--limit", "node03")
        assert code == 0
        assert (report["hosts"]["node03"]["status"], report["hosts"]["node03"]["changes"]) == ("ok", [])
        assert etc(fleet, "node03") == provisioned["node03"]
        # each instance still owns the same physical GPUs: its baseboard's, in bus order
        domain_of = {g["uuid"]: g["nvlink_domain"] for g in swapped["gpus"]}
        bus_of = {g["uuid"]: g["pci_bus_id"] for g in swapped["gpus"]}
        for name, domain in (("glm52", 0), ("kimik3", 1)):
            text = provisioned["node03"][f"gpufleet/instances/{name}.env"].decode()
            line = next(x for x in text.splitlines() if x.startswith("CUDA_VISIBLE_DEVICES="))
            owned = line.split("=", 1)[1].split(",")
            assert len(owned) == 8 and {domain_of[u] for u in owned} == {domain}
            assert [bus_of[u] for u in owned] == sorted(bus_of[u] for u in owned)
    finally:
        control.fault(fleet, "node03", None, clear=True)


def gpu_settings(fleet: Fleet, name: str) -> list[tuple[str, dict[str, Any], bool]]:
    return [(g["uuid"], g["power"], g["persistence_mode"]) for g in gpus(fleet, name)]


def test_impossible_targets_are_refused_before_any_change(fleet: Fleet, provisioned, tmp_path: Path) -> None:
    first = state.present_gpus(state.load(node_dir(fleet, "node01")))[0]["uuid"]
    host_vars = fleet.root / "host_vars"
    host_vars.mkdir(exist_ok=True)
    (host_vars / "node01.yml").write_text(f"gpu_power_limits:\n  {first}: 1500\n")
    control.fault(fleet, "node01", "persistence-off", clear=False)
    # a fabric setting the RDMA roles (which run first) would fix: it must stay as found
    control.fault(fleet, "node01", "pfc-off", clear=False)
    control.fault(fleet, "node03", "gpu-missing", clear=False)
    before = {name: (etc(fleet, name), gpu_settings(fleet, name)) for name in ("node01", "node03")}
    try:
        code, report = provision(fleet, tmp_path, "--limit", "node01,node03")
        # a limit beyond node01's GPUs is configuration (exit 2), node03's missing GPU is the node's
        assert code == 2
        hosts = report["hosts"]
        assert hosts["node01"]["status"] == "failed" and hosts["node01"]["configuration_error"] is True
        assert "configuration_error" not in hosts["node03"]
        assert (
            f"Refusing to change any GPU: {first}: target 1500 W is outside its allowed range 200-1400 W"
            in hosts["node01"]["message"]
        )
        assert hosts["node03"]["status"] == "failed"
        assert (
            "instance kimik3 needs 8 GPUs on NVLink domain 1, which has 7 (1 missing)"
            in (hosts["node03"]["message"])
        )
        # node01: persistence was off and stays off, nothing ran; node03: its pinning files are untouched
        assert (etc(fleet, "node01"), gpu_settings(fleet, "node01")) == before["node01"]
        assert {on for _, _, on in before["node01"][1]} == {False}
        assert hosts["node01"]["changes"] == []
        instances = [k for k in before["node03"][0] if k.startswith("gpufleet/instances/")]
        assert len(instances) == 2
        assert all(etc(fleet, "node03")[k] == before["node03"][0][k] for k in instances)
        assert not [c for c in hosts["node03"]["changes"] if c["setting"].startswith("gpu_pinning.")]
        # the node-dependent limits were judged before any role ran: no role changed either node
        assert hosts["node03"]["changes"] == []
        assert etc(fleet, "node01") == before["node01"][0]
        missing = [c for c in hosts["node03"]["checks"] if not c["ok"]]
        assert [(c["name"], c["value"], c["limit"]) for c in missing] == [
            ("gpu_pinning.nvlink_domain_gpus[1]", 7, 8)
        ]
    finally:
        (host_vars / "node01.yml").unlink()
        control.fault(fleet, "node01", None, clear=True)
        control.fault(fleet, "node03", None, clear=True)


def test_a_power_limit_that_is_not_a_number_is_a_configuration_error(
    fleet: Fleet, provisioned, tmp_path: Path
) -> None:
    host_vars = fleet.root / "host_vars"
    host_vars.mkdir(exist_ok=True)
    (host_vars / "node02.yml").write_text("gpu_power_limit_w: abc\n")
    before = etc(fleet, "node02")
    try:
        code, report = provision(fleet, tmp_path, "--limit", "node02")
    finally:
        (host_vars / "node02.yml").unlink()
    assert code == 2
    host = report["hosts"]["node02"]
    assert host["configuration_error"] is True and host["changes"] == []
    assert "'gpu_power_limit_w' is of type str" in host["message"] and "Tagged" not in host["message"]
    assert etc(fleet, "node02") == before


def test_boot_unit_restores_the_limit_after_a_reboot(fleet: Fleet, provisioned, tmp_path: Path) -> None:
    host_vars = fleet.root / "host_vars"
    host_vars.mkdir(exist_ok=True)
    (host_vars / "node01.yml").write_text("gpu_power_limit_w: 1300\n")
    try:
        code, report = provision(fleet, tmp_path / "1300", "--limit", "node01")
        assert code == 0 and report["hosts"]["node01"]["status"] == "changed"
        fleet.reboot("node01")
        node = state.load(node_dir(fleet, "node01"))
        assert {(g["power"]["enforced_limit_w"], g["persistence_mode"]) for g in node["gpus"]} == {
            (1300.0, True)
        }
        assert node["units"]["gpufleet-gpu-power.service"]["active"] is True
        code, report = provision(fleet, tmp_path / "after-reboot", "--limit", "node01")
        assert (code, report["hosts"]["node01"]["changes"]) == (0, [])
    finally:
        (host_vars / "node01.yml").unlink()
