"""gpufleet.node.rdma_facts over a fake sysfs root: exact argv per command, facts, failures.

The node is a b300-16 as the simulator renders it (sysfs_rdma), and each command the module
runs is answered by the simulator's fake tool of that name, so the facts are read from the
real formats end to end.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpufleet.node.plugins.module_utils import rdma
from ansible_collections.gpufleet.node.plugins.modules import rdma_facts

from gpufleet.sim import build, faults_rdma, state, sysfs_rdma
from gpufleet.sim.tools import cma_roce_mode, ibdev2netdev, mlnx_qos, mlxlink

TOOLS: dict[str, Any] = {
    "ibdev2netdev": ibdev2netdev,
    "mlnx_qos": mlnx_qos,
    "cma_roce_mode": cma_roce_mode,
    "mlxlink": mlxlink,
}
BIN = "/usr/sbin"
NETDEVS = ["ens21np0", "ens38np0", "ens55np0", "ens72np0", "ens149np0", "ens166np0", "ens183np0", "ens200np0"]


class ExitJson(Exception):
    pass


class FailJson(Exception):
    pass


class Node:
    """A fake node: its sysfs under ``root``, the tools it has, the commands the module ran."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.installed = set(TOOLS)
        self.calls: list[list[str]] = []
        self.envs: list[dict[str, str] | None] = []
        self.override: dict[str, tuple[int, str, str]] = {}

    def run_command(self, args: list[str], environ_update: dict[str, str] | None = None, **_: Any) -> Any:
        self.calls.append(list(args))
        self.envs.append(environ_update)
        name = os.path.basename(args[0])
        if name in self.override:
            return self.override[name]
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = TOOLS[name].main(list(args[1:]), self.root)
        return rc, out.getvalue(), err.getvalue()

    def fault(self, name: str) -> None:
        with state.locked(self.root) as current:
            faults_rdma.FAULTS[name][0](current, self.root / "sys")


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Node]:
    sys_root = tmp_path / "sys"
    sys_root.mkdir()
    node_state = build.build_node_state("b300-node-0", "b300-16", 0)
    for nic in node_state["nics"]:
        pci_dir = sys_root / "devices" / "pci0000:00" / nic["pci_bus_id"]
        pci_dir.mkdir(parents=True)
        for name, value in (
            ("vendor", "0x15b3"),
            ("device", nic["pci_device_id"]),
            ("numa_node", nic["numa_node"]),
        ):
            (pci_dir / name).write_text(f"{value}\n", encoding="utf-8")
        sysfs_rdma.render_nic(node_state, nic, pci_dir, sys_root)
    state.save(tmp_path, node_state)
    fake = Node(tmp_path)

    def get_bin_path(module: Any, name: str, required: bool = False, opt_dirs: Any = None) -> str | None:
        if name in fake.installed:
            return f"{BIN}/{name}"
        if required:
            module.fail_json(msg=f"Failed to find required executable {name!r}")
        return None

    def exit_json(module: Any, **kwargs: Any) -> None:
        kwargs.setdefault("warnings", list(getattr(module, "_warnings", [])))
        raise ExitJson(kwargs)

    def fail_json(module: Any, **kwargs: Any) -> None:
        raise FailJson(kwargs)

    monkeypatch.setattr(rdma, "SYSFS_ROOT", str(tmp_path))
    monkeypatch.setattr(
        basic.AnsibleModule, "run_command", lambda self, args, **kw: fake.run_command(args, **kw)
    )
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", get_bin_path)
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)
    monkeypatch.setattr(
        basic.AnsibleModule, "warn", lambda self, msg: self.__dict__.setdefault("_warnings", []).append(msg)
    )
    yield fake


def run_module(args: dict[str, Any] | None = None) -> dict[str, Any]:
    with patch_module_args(args or {}), pytest.raises(ExitJson) as result:
        rdma_facts.main()
    outcome: dict[str, Any] = result.value.args[0]
    return outcome


def fail_module(args: dict[str, Any] | None = None) -> dict[str, Any]:
    with patch_module_args(args or {}), pytest.raises(FailJson) as result:
        rdma_facts.main()
    outcome: dict[str, Any] = result.value.args[0]
    return outcome


def devices(result: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = result["ansible_facts"]["gpufleet_rdma"]["devices"]
    return found


# ------------------------------------------------------------------ tuned node


def test_tuned_node_facts_and_exact_commands(node: Node) -> None:
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


def test_second_run_is_identical(node: Node) -> None:
    first = run_module()
    calls = list(node.calls)
    second = run_module()
    assert second == first and second["changed"] is False
    assert node.calls == calls + calls


def test_check_mode_runs_the_same_reads(node: Node) -> None:
    normal = run_module()
    calls = list(node.calls)
    checked = run_module({"_ansible_check_mode": True})
    assert devices(checked) == devices(normal)
    assert node.calls[len(calls) :] == calls


# ------------------------------------------------------------------ options


def test_interfaces_by_rdma_device_or_netdev(node: Node) -> None:
    result = run_module({"interfaces": ["ens38np0", "mlx5_0"]})
    assert list(devices(result)) == ["mlx5_0", "mlx5_1"]
    assert node.calls == [
        [f"{BIN}/ibdev2netdev"],
        [f"{BIN}/mlnx_qos", "-i", "ens21np0"],
        [f"{BIN}/mlnx_qos", "-i", "ens38np0"],
    ]


def test_unknown_interface_fails_naming_what_exists(node: Node) -> None:
    failed = fail_module({"interfaces": ["mlx5_0", "ens9np0"]})
    assert failed["msg"].startswith(
        "interfaces ens9np0 are not mlx5 RDMA devices or their netdevs on this node"
    )
    assert "mlx5_7 (ens200np0)" in failed["msg"]
    assert node.calls == [[f"{BIN}/ibdev2netdev"]]


def test_link_diagnostics_runs_mlxlink_per_device(node: Node) -> None:
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


def test_link_diagnostics_without_mlxlink_fails(node: Node) -> None:
    node.installed.discard("mlxlink")
    assert "mlxlink" in fail_module({"link_diagnostics": True})["msg"]


def test_without_ibdev2netdev_the_sysfs_mapping_is_used(node: Node) -> None:
    node.installed.discard("ibdev2netdev")
    result = run_module()
    assert node.calls == [[f"{BIN}/mlnx_qos", "-i", n] for n in NETDEVS]
    assert [d["netdev"] for d in devices(result).values()] == NETDEVS


# ------------------------------------------------------------------ faults show as facts


def test_pfc_off(node: Node) -> None:
    node.fault("pfc-off")
    assert {tuple(d["pfc"]) for d in devices(run_module()).values()} == {(0,) * 8}


def test_ecn_off(node: Node) -> None:
    node.fault("ecn-off")
    ecn = [d["ecn"] for d in devices(run_module()).values()]
    assert ecn == [{"np": [False] * 8, "rp": [False] * 8}] * 8


def test_roce_v1(node: Node) -> None:
    node.fault("roce-v1")
    assert {d["roce_mode"] for d in devices(run_module()).values()} == {"v1"}


def test_link_down(node: Node) -> None:
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


def test_roce_mode_from_cma_roce_mode_when_configfs_group_is_absent(node: Node) -> None:
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


def test_no_mlx5_devices_is_an_empty_dict_and_a_warning(node: Node) -> None:
    (node.root / "sys" / "class" / "infiniband").rename(node.root / "sys" / "class" / "infiniband.off")
    result = run_module()
    assert devices(result) == {}
    assert result["changed"] is False
    assert any("No mlx5 RDMA devices" in w for w in result["warnings"])
    assert node.calls == []


def test_no_mlx5_devices_needs_no_tools(node: Node) -> None:
    (node.root / "sys" / "class" / "infiniband").rename(node.root / "sys" / "class" / "infiniband.off")
    node.installed.clear()
    assert devices(run_module()) == {}


def test_mlnx_qos_failure_fails_with_command_and_output(node: Node) -> None:
    node.override["mlnx_qos"] = (1, "ETS features are not supported on your system\n", "")
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


def test_unreadable_mlnx_qos_output_fails(node: Node) -> None:
    node.override["mlnx_qos"] = (0, "DCBX mode: OS controlled\nPFC configuration:\n", "")
    failed = fail_module()
    assert failed["msg"].startswith(f"Could not read the output of {BIN}/mlnx_qos -i ens21np0: mlnx_qos:")
    assert failed["cmd"] == [f"{BIN}/mlnx_qos", "-i", "ens21np0"]


def test_missing_mlnx_qos_fails(node: Node) -> None:
    node.installed.discard("mlnx_qos")
    assert "mlnx_qos" in fail_module()["msg"]


def test_ibdev2netdev_failure_fails(node: Node) -> None:
    node.override["ibdev2netdev"] = (255, "", "")
    failed = fail_module()
    assert (failed["cmd"], failed["rc"]) == ([f"{BIN}/ibdev2netdev"], 255)
    assert "mlx5 drivers are loaded" in failed["msg"]


def test_sysfs_in_an_unknown_format_fails(node: Node) -> None:
    (node.root / "sys" / "class" / "infiniband" / "mlx5_3" / "ports" / "1" / "state").write_text("ACTIVE\n")
    failed = fail_module()
    assert failed["msg"].startswith("Could not read the RDMA state of mlx5_3 from sysfs:")
    assert "'<code>: <name>'" in failed["msg"]
