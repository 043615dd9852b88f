"""gpufleet.node.rdma_facts over a fake sysfs root: exact argv per command, facts, failures.

The node is a b300-16 as the simulator renders it (sysfs_rdma), and each command the module
runs is answered by the simulator's fake tool of that name, so the facts are read from the
real formats end to end.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.modules import rdma_facts
from gpufleet_sim import state
from gpufleet_sim.tools import cma_roce_mode, ibdev2netdev, mlnx_qos, mlxlink

from tests.unit.modules import harness, rdmanode

TOOLS: dict[str, Any] = {
    "ibdev2netdev": ibdev2netdev,
    "mlnx_qos": mlnx_qos,
    "cma_roce_mode": cma_roce_mode,
    "mlxlink": mlxlink,
}
BIN = rdmanode.BIN
NETDEVS = ["ens21np0", "ens38np0", "ens55np0", "ens72np0", "ens149np0", "ens166np0", "ens183np0", "ens200np0"]


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> rdmanode.RdmaNode:
    return rdmanode.install(rdmanode.RdmaNode(tmp_path, TOOLS), monkeypatch)


def run_module(args: dict[str, Any] | None = None) -> dict[str, Any]:
    return harness.run_module(rdma_facts.main, args or {}, expect=harness.ExitJson).result


def fail_module(args: dict[str, Any] | None = None) -> dict[str, Any]:
    return harness.run_module(rdma_facts.main, args or {}, expect=harness.FailJson).result


def devices(result: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = result["ansible_facts"]["gpufleet_rdma"]["devices"]
    return found


# ------------------------------------------------------------------ tuned node


def test_tuned_node_facts_and_exact_commands(node: rdmanode.RdmaNode) -> None:
    result = run_module()
    assert result["changed"] is False
    assert node.calls == [[f"{BIN}/ibdev2netdev"]] + [[f"{BIN}/mlnx_qos", "-i", n] for n in NETDEVS]
    assert node.envs == [{"LC_ALL": "C"}] * 9
    found = devices(result)
    assert list(found) == [f"mlx5_{i}" for i in range(8)]
    nic = state.load(node.root)["nics"][0]
    assert found["mlx5_0"] == {
        "netdev": "ens21np0",
        "port": 1,
        "pci_bus_id": "0000:15:00.0",
        "numa_node": 0,
        "link_layer": "Ethernet",
        "state": "ACTIVE",
        "phys_state": "LinkUp",
        "speed_gbps": 400,
        "rate": "400 Gb/sec (4X NDR)",
        "mtu": 4200,
        "operstate": "up",
        "roce_mode": "v2",
        "roce_tos": 106,
        "traffic_class": 106,
        "trust": "dscp",
        "pfc": [0, 0, 0, 1, 0, 0, 0, 0],
        "ecn": {"np": [p == 3 for p in range(8)], "rp": [p == 3 for p in range(8)]},
        "cnp_dscp": 48,
        "fw_version": "40.44.1036",
        "node_guid": nic["node_guid"],
        "hca_type": "MT4131",
        "mlxlink": None,
    }
    assert [d["numa_node"] for d in found.values()] == [0, 0, 0, 0, 1, 1, 1, 1]


def test_second_run_is_identical(node: rdmanode.RdmaNode) -> None:
    first = run_module()
    calls = list(node.calls)
    second = run_module()
    assert second == first and second["changed"] is False
    assert node.calls == calls + calls


def test_check_mode_runs_the_same_reads(node: rdmanode.RdmaNode) -> None:
    normal = run_module()
    calls = list(node.calls)
    checked = run_module({"_ansible_check_mode": True})
    assert devices(checked) == devices(normal)
    assert node.calls[len(calls) :] == calls


# ------------------------------------------------------------------ options


def test_interfaces_by_rdma_device_or_netdev(node: rdmanode.RdmaNode) -> None:
    result = run_module({"interfaces": ["ens38np0", "mlx5_0"]})
    assert list(devices(result)) == ["mlx5_0", "mlx5_1"]
    assert node.calls == [
        [f"{BIN}/ibdev2netdev"],
        [f"{BIN}/mlnx_qos", "-i", "ens21np0"],
        [f"{BIN}/mlnx_qos", "-i", "ens38np0"],
    ]


def test_unknown_interface_fails_naming_what_exists(node: rdmanode.RdmaNode) -> None:
    failed = fail_module({"interfaces": ["mlx5_0", "ens9np0"]})
    assert failed["msg"].startswith(
        "interfaces ens9np0 are not mlx5 RDMA devices or their netdevs on this node"
    )
    assert "mlx5_7 (ens200np0)" in failed["msg"]
    assert node.calls == [[f"{BIN}/ibdev2netdev"]]


def test_link_diagnostics_runs_mlxlink_per_device(node: rdmanode.RdmaNode) -> None:
    result = run_module({"interfaces": ["mlx5_7"], "link_diagnostics": True})
    assert node.calls == [
        [f"{BIN}/ibdev2netdev"],
        [f"{BIN}/mlnx_qos", "-i", "ens200np0"],
        [f"{BIN}/mlxlink", "-d", "0000:c8:00.0"],
    ]
    assert devices(result)["mlx5_7"]["mlxlink"] == {
        "state": "Active",
        "physical_state": "LinkUp",
        "speed": "400G",
        "speed_gbps": 400,
        "width": "4x",
        "fec": "Standard_RS-FEC - (544,514)",
        "status_opcode": 0,
        "recommendation": "No issue was observed",
    }


def test_link_diagnostics_without_mlxlink_fails(node: rdmanode.RdmaNode) -> None:
    node.installed.discard("mlxlink")
    assert "mlxlink" in fail_module({"link_diagnostics": True})["msg"]


def test_without_ibdev2netdev_the_sysfs_mapping_is_used(node: rdmanode.RdmaNode) -> None:
    node.installed.discard("ibdev2netdev")
    result = run_module()
    assert node.calls == [[f"{BIN}/mlnx_qos", "-i", n] for n in NETDEVS]
    assert [d["netdev"] for d in devices(result).values()] == NETDEVS


# ------------------------------------------------------------------ faults show as facts


def test_pfc_off(node: rdmanode.RdmaNode) -> None:
    node.fault("pfc-off")
    assert {tuple(d["pfc"]) for d in devices(run_module()).values()} == {(0,) * 8}


def test_ecn_off(node: rdmanode.RdmaNode) -> None:
    node.fault("ecn-off")
    ecn = [d["ecn"] for d in devices(run_module()).values()]
    assert ecn == [{"np": [False] * 8, "rp": [False] * 8}] * 8


def test_roce_v1(node: rdmanode.RdmaNode) -> None:
    node.fault("roce-v1")
    assert {d["roce_mode"] for d in devices(run_module()).values()} == {"v1"}


def test_link_down(node: rdmanode.RdmaNode) -> None:
    node.fault("link-down")
    found = devices(run_module())
    down = found["mlx5_7"]
    assert (down["state"], down["phys_state"], down["speed_gbps"], down["operstate"]) == (
        "DOWN",
        "Disabled",
        None,
        "down",
    )
    assert down["rate"] == "40 Gb/sec (4X QDR)"
    assert [d["state"] for d in found.values()].count("ACTIVE") == 7


# ------------------------------------------------------------------ RoCE mode without configfs


def test_roce_mode_from_cma_roce_mode_when_configfs_group_is_absent(node: rdmanode.RdmaNode) -> None:
    # the usual real-node case: nobody created the device's rdma_cm group
    cm = node.root / "sys" / "kernel" / "config" / "rdma_cm" / "mlx5_2"
    for path in sorted(cm.rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    cm.rmdir()
    result = run_module({"interfaces": ["mlx5_2"]})
    assert node.calls == [
        [f"{BIN}/ibdev2netdev"],
        [f"{BIN}/mlnx_qos", "-i", "ens55np0"],
        [f"{BIN}/cma_roce_mode", "-d", "mlx5_2", "-p", "1"],
    ]
    assert devices(result)["mlx5_2"]["roce_mode"] == "v2"


# ------------------------------------------------------------------ nothing to report, failures


def test_no_mlx5_devices_is_an_empty_dict_and_a_warning(node: rdmanode.RdmaNode) -> None:
    (node.root / "sys" / "class" / "infiniband").rename(node.root / "sys" / "class" / "infiniband.off")
    result, warnings, _ = harness.run_module(rdma_facts.main, {}, expect=harness.ExitJson)
    assert devices(result) == {}
    assert result["changed"] is False
    assert any("No mlx5 RDMA devices" in w for w in warnings)
    assert node.calls == []


def test_no_mlx5_devices_needs_no_tools(node: rdmanode.RdmaNode) -> None:
    (node.root / "sys" / "class" / "infiniband").rename(node.root / "sys" / "class" / "infiniband.off")
    node.installed.clear()
    assert devices(run_module()) == {}


def test_mlnx_qos_failure_fails_with_command_and_output(node: rdmanode.RdmaNode) -> None:
    node.override["mlnx_qos"] = lambda args: (1, "ETS features are not supported on your system\n", "")
    failed = fail_module()
    assert failed["cmd"] == [f"{BIN}/mlnx_qos", "-i", "ens21np0"]
    assert (failed["rc"], failed["stdout"], failed["stderr"]) == (
        1,
        "ETS features are not supported on your system\n",
        "",
    )
    assert failed["msg"].startswith(
        f"{BIN}/mlnx_qos -i ens21np0 failed (rc=1): ETS features are not supported"
    )
    assert "mlnx_qos runs as root" in failed["msg"]


def test_unreadable_mlnx_qos_output_fails(node: rdmanode.RdmaNode) -> None:
    node.override["mlnx_qos"] = lambda args: (0, "DCBX mode: OS controlled\nPFC configuration:\n", "")
    failed = fail_module()
    assert failed["msg"].startswith(f"Could not read the output of {BIN}/mlnx_qos -i ens21np0: mlnx_qos:")
    assert failed["cmd"] == [f"{BIN}/mlnx_qos", "-i", "ens21np0"]


def test_missing_mlnx_qos_fails(node: rdmanode.RdmaNode) -> None:
    node.installed.discard("mlnx_qos")
    assert "mlnx_qos" in fail_module()["msg"]


def test_ibdev2netdev_failure_fails(node: rdmanode.RdmaNode) -> None:
    node.override["ibdev2netdev"] = lambda args: (255, "", "")
    failed = fail_module()
    assert (failed["cmd"], failed["rc"]) == ([f"{BIN}/ibdev2netdev"], 255)
    assert "mlx5 drivers are loaded" in failed["msg"]


def test_sysfs_in_an_unknown_format_fails(node: rdmanode.RdmaNode) -> None:
    (node.root / "sys" / "class" / "infiniband" / "mlx5_3" / "ports" / "1" / "state").write_text("ACTIVE\n")
    failed = fail_module()
    assert failed["msg"].startswith("Could not read the RDMA state of mlx5_3 from sysfs:")
    assert "'<code>: <name>'" in failed["msg"]
