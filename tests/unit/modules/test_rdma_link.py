"""gpufleet.node.rdma_link over a fake sysfs root: exact argv per command, changes, checks, refusals.

The node is a b300-16 as the simulator renders it (sysfs_rdma); each command the module runs is
answered by the simulator's fake tool of that name (mlxconfig, cma_roce_mode, mlxlink).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.modules import rdma_link
from gpufleet_sim import state
from gpufleet_sim.tools import cma_roce_mode, mlxconfig, mlxlink

from tests.unit.modules import harness, rdmanode

TOOLS: dict[str, Any] = {"mlxconfig": mlxconfig, "cma_roce_mode": cma_roce_mode, "mlxlink": mlxlink}
BIN = rdmanode.BIN
MLXCONFIG = f"{BIN}/mlxconfig"
CMA = f"{BIN}/cma_roce_mode"
NETDEVS = ["ens21np0", "ens38np0", "ens55np0", "ens72np0", "ens149np0", "ens166np0", "ens183np0", "ens200np0"]
BDFS = ["0000:15:00.0", "0000:26:00.0", "0000:37:00.0", "0000:48:00.0"]
BDFS += ["0000:95:00.0", "0000:a6:00.0", "0000:b7:00.0", "0000:c8:00.0"]
IBDEVS = [f"mlx5_{i}" for i in range(8)]
QUERIES = [[MLXCONFIG, "-d", bdf, "q", "LINK_TYPE_P1"] for bdf in BDFS]


class Node(rdmanode.RdmaNode):
    """The RDMA node, with what these tests look at."""

    def configfs(self, ibdev: str, name: str) -> Path:
        return self.root / "sys" / "kernel" / "config" / "rdma_cm" / ibdev / "ports" / "1" / name

    def mtu(self, netdev: str) -> Path:
        return self.root / "sys" / "class" / "net" / netdev / "mtu"

    def make_ib(self, index: int, pending: str | None = None) -> None:
        """Port `index` runs InfiniBand (firmware LINK_TYPE IB), optionally with another type pending."""
        with state.locked(self.root) as current:
            nic = current["nics"][index]
            nic["link_type"], nic["pending_link_type"] = "ib", pending
        link_layer = self.root / "sys" / "class" / "infiniband" / IBDEVS[index] / "ports" / "1" / "link_layer"
        link_layer.write_text("InfiniBand\n")


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Node:
    return rdmanode.install(Node(tmp_path, TOOLS), monkeypatch)


def run_module(args: dict[str, Any] | None = None) -> dict[str, Any]:
    return harness.run_module(
        rdma_link.main, {"boot_unit": False, **(args or {})}, expect=harness.ExitJson
    ).result


def fail_module(args: dict[str, Any] | None = None) -> dict[str, Any]:
    return harness.run_module(
        rdma_link.main, {"boot_unit": False, **(args or {})}, expect=harness.FailJson
    ).result


def failed_checks(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in result["checks"] if not c["ok"]]


# ------------------------------------------------------------------ tuned node


def test_tuned_node_is_left_alone_and_every_link_checks_out(node: Node) -> None:
    before = node.snapshot()
    result = run_module({"min_speed_gbps": 400})
    assert (result["changed"], result["changes"], result["reboot_required"], result["hints"]) == (
        False,
        [],
        False,
        [],
    )
    assert node.calls == QUERIES
    assert node.envs == [{"LC_ALL": "C"}] * 8
    assert [c["name"] for c in result["checks"]] == [
        name for i in IBDEVS for name in (f"rdma_link.link_state[{i}]", f"rdma_link.speed_gbps[{i}]")
    ]
    assert all(c["ok"] for c in result["checks"])
    assert result["checks"][1] == {
        "name": "rdma_link.speed_gbps[mlx5_0]",
        "ok": True,
        "value": 400,
        "limit": 400,
        "unit": "Gb/s",
        "message": "mlx5_0 (ens21np0) runs at 400 Gb/s",
    }
    assert result["ports"]["mlx5_0"] == {
        "netdev": "ens21np0",
        "port": 1,
        "pci_bus_id": "0000:15:00.0",
        "link_layer": "Ethernet",
        "link_type_next_boot": "eth",
        "mtu": 4200,
        "roce_mode": "v2",
        "roce_tos": 106,
        "state": "ACTIVE",
        "speed_gbps": 400,
    }
    assert node.snapshot() == before


def test_boot_commands_reapply_mtu_mode_and_tos(node: Node) -> None:
    sys_root = f"{node.root}/sys"
    lines = run_module({"ports": ["mlx5_0"]})["boot_commands"]
    assert lines == [
        f"echo 4200 > {sys_root}/class/net/ens21np0/mtu",
        f"{CMA} -d mlx5_0 -p 1 -m 2",
        f"mkdir -p {sys_root}/kernel/config/rdma_cm/mlx5_0",
        f"echo 106 > {sys_root}/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos",
    ]


# ------------------------------------------------------------------ RoCE settings


def test_roce_v1_is_set_to_v2_on_every_port(node: Node) -> None:
    node.fault("roce-v1")
    result = run_module()
    assert result["changed"] is True
    assert result["changes"] == [
        {"setting": f"rdma_link.roce_mode[{i}]", "from": "v1", "to": "v2"} for i in IBDEVS
    ]
    sets = [c for c in node.calls if c[0] == CMA]
    assert sets == [[CMA, "-d", i, "-p", "1", "-m", "2"] for i in IBDEVS]
    assert node.calls == [*QUERIES, *sets]
    assert {node.configfs(i, "default_roce_mode").read_text() for i in IBDEVS} == {"RoCE v2\n"}
    node.calls.clear()
    again = run_module()
    assert (again["changed"], again["changes"], node.calls) == (False, [], QUERIES)


def test_mtu_and_tos_are_written_and_read_back(node: Node) -> None:
    node.mtu("ens38np0").write_text("1500\n")
    node.configfs("mlx5_1", "default_roce_tos").write_text("0\n")
    result = run_module()
    assert result["changes"] == [
        {"setting": "rdma_link.mtu[ens38np0]", "from": 1500, "to": 4200},
        {"setting": "rdma_link.roce_tos[mlx5_1]", "from": 0, "to": 106},
    ]
    assert node.calls == QUERIES  # files only, no tool
    assert node.mtu("ens38np0").read_text() == "4200\n"
    assert node.configfs("mlx5_1", "default_roce_tos").read_text() == "106\n"


def test_check_mode_reports_changes_writes_nothing_and_diffs(node: Node) -> None:
    node.fault("roce-v1")
    node.mtu("ens21np0").write_text("1500\n")
    before = node.snapshot()
    checked = run_module({"_ansible_check_mode": True, "_ansible_diff": True})
    assert checked["changed"] is True
    assert checked["changes"][:2] == [
        {"setting": "rdma_link.mtu[ens21np0]", "from": 1500, "to": 4200},
        {"setting": "rdma_link.roce_mode[mlx5_0]", "from": "v1", "to": "v2"},
    ]
    assert len(checked["changes"]) == 9
    assert node.calls == QUERIES and node.snapshot() == before
    assert "mlx5_0.mtu: 1500\nmlx5_0.roce_mode: v1\n" in checked["diff"][0]["before"]
    assert "mlx5_0.mtu: 4200\nmlx5_0.roce_mode: v2\n" in checked["diff"][0]["after"]
    assert run_module()["changes"] == checked["changes"]


def test_other_values_for_a_site_plan(node: Node) -> None:
    result = run_module({"ports": ["ens21np0"], "tos": 160, "mtu": 9000, "roce_mode": "v1"})
    assert result["changes"] == [
        {"setting": "rdma_link.mtu[ens21np0]", "from": 4200, "to": 9000},
        {"setting": "rdma_link.roce_mode[mlx5_0]", "from": "v2", "to": "v1"},
        {"setting": "rdma_link.roce_tos[mlx5_0]", "from": 106, "to": 160},
    ]
    assert node.calls == [QUERIES[0], [CMA, "-d", "mlx5_0", "-p", "1", "-m", "1"]]


def test_a_setting_that_does_not_take_fails(node: Node) -> None:
    node.fault("roce-v1")
    node.override["cma_roce_mode"] = lambda args: (0, "IB/RoCE v1\n", "")  # accepted, nothing changed
    failed = fail_module({"ports": ["mlx5_0"]})
    assert failed["msg"].startswith("mlx5_0: roce_mode did not take (roce_mode reads v1, not v2)")


# ------------------------------------------------------------------ link verification


def test_link_down_is_a_named_failed_check_not_a_change(node: Node) -> None:
    node.fault("link-down")
    result = run_module({"min_speed_gbps": 400})
    assert (result["changed"], result["changes"]) == (False, [])
    assert failed_checks(result) == [
        {
            "name": "rdma_link.link_state[mlx5_7]",
            "ok": False,
            "value": "DOWN",
            "limit": "ACTIVE",
            "unit": "",
            "message": "mlx5_7 (ens200np0) link is DOWN (physical state Disabled); configuration cannot fix "
            "this: check the cable, transceiver and switch port (mlxlink: Cable is unplugged)",
        }
    ]
    assert "rdma_link.speed_gbps[mlx5_7]" not in [c["name"] for c in result["checks"]]
    assert node.calls == [*QUERIES, [f"{BIN}/mlxlink", "-d", "0000:c8:00.0"]]
    assert result["ports"]["mlx5_7"]["speed_gbps"] is None


def test_link_down_without_mlxlink_still_names_the_port(node: Node) -> None:
    node.fault("link-down")
    node.installed.discard("mlxlink")
    [down] = failed_checks(run_module())
    assert down["name"] == "rdma_link.link_state[mlx5_7]" and "mlxlink" not in down["message"]


def test_slow_links_fail_the_speed_check(node: Node) -> None:
    result = run_module({"ports": ["mlx5_0"], "min_speed_gbps": 800})
    assert failed_checks(result) == [
        {
            "name": "rdma_link.speed_gbps[mlx5_0]",
            "ok": False,
            "value": 400,
            "limit": 800,
            "unit": "Gb/s",
            "message": "mlx5_0 (ens21np0) runs at 400 Gb/s, below the required 800 Gb/s (check the cable, "
            "the switch port speed and mlxlink -d mlx5_0)",
        }
    ]


# ------------------------------------------------------------------ link type


def test_pending_infiniband_is_set_back_without_a_reboot(node: Node) -> None:
    with state.locked(node.root) as current:
        current["nics"][0]["pending_link_type"] = "ib"
    result = run_module({"ports": ["mlx5_0"]})
    assert result["changes"] == [{"setting": "rdma_link.link_type[mlx5_0]", "from": "ib", "to": "eth"}]
    assert node.calls == [QUERIES[0], [MLXCONFIG, "-y", "-d", BDFS[0], "set", "LINK_TYPE_P1=ETH"]]
    assert result["reboot_required"] is False
    assert state.load(node.root)["nics"][0]["pending_link_type"] == "eth"


def test_infiniband_port_needs_a_reboot_and_gets_no_roce_settings(node: Node) -> None:
    node.make_ib(0)
    result = run_module({"ports": ["mlx5_0", "mlx5_1"]})
    assert result["changes"] == [{"setting": "rdma_link.link_type[mlx5_0]", "from": "ib", "to": "eth"}]
    assert result["reboot_required"] is True
    assert result["hints"] == [
        "mlx5_0 runs ib; its firmware link type is eth from the next firmware reset or cold boot"
    ]
    assert [c["name"] for c in result["checks"]] == ["rdma_link.link_state[mlx5_1]"]
    assert [line for line in result["boot_commands"] if "mlx5_0" in line or "ens21np0" in line] == []
    node.calls.clear()
    again = run_module({"ports": ["mlx5_0"]})  # pending now: no change, still a reboot to go
    assert (again["changes"], again["reboot_required"]) == ([], True)
    assert node.calls == [QUERIES[0]]


def test_check_mode_link_type_change_runs_no_mlxconfig_set(node: Node) -> None:
    node.make_ib(0)
    checked = run_module({"ports": ["mlx5_0"], "_ansible_check_mode": True})
    assert checked["changes"] == [{"setting": "rdma_link.link_type[mlx5_0]", "from": "ib", "to": "eth"}]
    assert checked["reboot_required"] is True
    assert node.calls == [QUERIES[0]]


def test_ethernet_only_nic_has_no_link_type_setting(node: Node) -> None:
    node.override["mlxconfig"] = lambda args: (
        1,
        "-E- The Device doesn't support LINK_TYPE_P1 parameter\n",
        "",
    )
    result = run_module({"ports": ["mlx5_0"]})
    assert (result["changes"], result["hints"]) == ([], [])
    assert result["ports"]["mlx5_0"]["link_type_next_boot"] is None


def test_without_mlxconfig_an_ethernet_port_is_only_hinted(node: Node) -> None:
    node.installed.discard("mlxconfig")
    result = run_module({"ports": ["mlx5_0"]})
    assert result["changes"] == [] and node.calls == []
    assert result["hints"] == [
        "mlxconfig/mstconfig is not installed: the firmware link type of mlx5_0 was not checked"
    ]


def test_without_mlxconfig_an_infiniband_port_fails(node: Node) -> None:
    node.installed.discard("mlxconfig")
    node.make_ib(0)
    assert fail_module({"ports": ["mlx5_0"]})["msg"].startswith(
        "mlx5_0 runs ib and mlxconfig (MFT) or mstconfig (mstflint) is needed to make it eth"
    )


def test_mlxconfig_failure_names_the_command(node: Node) -> None:
    node.override["mlxconfig"] = lambda args: (1, "-E- Failed to open the device\n", "")
    failed = fail_module({"ports": ["mlx5_0"]})
    assert failed["cmd"] == QUERIES[0]
    assert failed["msg"].startswith(f"{' '.join(QUERIES[0])} failed (rc=1): -E- Failed to open the device.")


# ------------------------------------------------------------------ selection and refusals


def test_ports_by_rdma_device_or_netdev(node: Node) -> None:
    result = run_module({"ports": ["ens200np0", "mlx5_2"]})
    assert list(result["ports"]) == ["mlx5_2", "mlx5_7"]
    assert node.calls == [QUERIES[2], QUERIES[7]]


def test_unknown_port_is_refused_before_anything_runs(node: Node) -> None:
    node.fault("roce-v1")
    before = node.snapshot()
    failed = fail_module({"ports": ["mlx5_0", "eth9"]})
    assert failed["msg"].startswith("ports: eth9 are not mlx5 RDMA devices or their netdevs on this node")
    assert "mlx5_7 (ens200np0)" in failed["msg"]
    assert node.calls == [] and node.snapshot() == before


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"tos": 256}, "tos: 256 is not a type of service; ToS values are 0..255"),
        ({"mtu": 10000}, "mtu: 10000 is outside 68..9978"),
        ({"min_speed_gbps": -1}, "min_speed_gbps: -1 is negative"),
    ],
)
def test_out_of_range_values_are_refused(node: Node, args: dict[str, Any], message: str) -> None:
    assert fail_module(args)["msg"].startswith(message)
    assert node.calls == []


def test_no_mlx5_devices_fails_closed(node: Node) -> None:
    (node.root / "sys" / "class" / "infiniband").rename(node.root / "sys" / "class" / "infiniband.off")
    assert fail_module()["msg"].startswith("No mlx5 RDMA devices under /sys/class/infiniband")


def test_missing_rdma_cm_configfs_fails_with_what_to_load(node: Node) -> None:
    cm = node.root / "sys" / "kernel" / "config" / "rdma_cm"
    cm.rename(cm.with_name("rdma_cm.off"))
    assert "modprobe rdma_cm" in fail_module({"ports": ["mlx5_0"]})["msg"]


def test_ethernet_port_without_netdev_fails(node: Node) -> None:
    (
        node.root / "sys" / "class" / "infiniband" / "mlx5_0" / "ports" / "1" / "gid_attrs" / "ndevs" / "0"
    ).write_text("\n")
    assert fail_module({"ports": ["mlx5_0"]})["msg"].startswith("mlx5_0 is an Ethernet port without a netdev")
