"""The simulated NIC side: sysfs_rdma's tree, the fake RDMA tools, the RDMA faults.

Each fake tool's output is read back with the parsers the modules use (round trip), so a
format drift on either side fails here; set commands must change the node state and show.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.rdma import rdma_parse, rdma_read
from gpufleet_sim import faults_rdma, state, sysfs_rdma
from gpufleet_sim.tools import cma_roce_mode, ibdev2netdev, mlnx_qos, mlxconfig, mlxlink

from tests.unit.modules import rdmanode
from tests.unit.mutations import FIXTURES

TUNED_PFC = [0, 0, 0, 1, 0, 0, 0, 0]


@pytest.fixture
def node(tmp_path: Path) -> Path:
    """A b300-16 node: state plus, per NIC, a PCI function directory and its RDMA sysfs."""
    node_dir = tmp_path / "node"
    rdmanode.render(node_dir)
    return node_dir


def run(
    tool: Any, argv: list[str], node_dir: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    code = tool.main(argv, node_dir)
    out, err = capsys.readouterr()
    return code, out, err


def nics(node_dir: Path) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = state.load(node_dir)["nics"]
    return found


@pytest.fixture
def root(node: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Point the module_utils sysfs readers at the node, as /sys is inside it."""
    monkeypatch.setattr(rdma_read, "SYSFS_ROOT", str(node))
    yield node


def inject(node_dir: Path, name: str, clear: bool = False) -> None:
    with state.locked(node_dir) as current:
        faults_rdma.FAULTS[name][1 if clear else 0](current, node_dir / "sys")


# ------------------------------------------------------------------ sysfs tree


def test_rendered_tree_reads_as_tuned(root: Path) -> None:
    assert rdma_read.list_ib_devices() == [f"mlx5_{i}" for i in range(8)]
    for nic in nics(root):
        ibdev, netdev = nic["ibdev"], nic["netdev"]
        port = rdma_read.read_ib_port(ibdev, 1)
        assert (port["state"], port["phys_state"], port["rate_gbps"], port["link_layer"]) == (
            "ACTIVE",
            "LinkUp",
            400,
            "Ethernet",
        )
        assert port["netdev"] == netdev
        assert rdma_read.read_netdev(netdev) == {
            "mtu": 4200,
            "operstate": "up",
            "speed_mbps": 400000,
            "carrier": True,
            "address": nic["mac"],
        }
        assert rdma_read.read_ecn(netdev) == {
            "np": [p == 3 for p in range(8)],
            "rp": [p == 3 for p in range(8)],
            "cnp_dscp": 48,
        }
        assert (
            rdma_read.read_roce_mode(ibdev, 1),
            rdma_read.read_roce_tos(ibdev, 1),
            rdma_read.read_traffic_class(ibdev, 1),
        ) == (
            "v2",
            106,
            106,
        )
        device = rdma_read.read_ib_device(ibdev)
        assert device == {
            "fw_version": nic["fw_version"],
            "node_guid": nic["node_guid"],
            "hca_type": "MT4131",
            "pci_bus_id": nic["pci_bus_id"],
            "numa_node": nic["numa_node"],
        }


def test_class_links_are_relative_like_sysfs(node: Path) -> None:
    nic = nics(node)[0]
    for link in (sysfs_rdma.netdev_dir(node / "sys", nic), sysfs_rdma.ibdev_dir(node / "sys", nic)):
        target = os.readlink(link)
        assert target.startswith("../../devices/pci0000:00/" + nic["pci_bus_id"])
    for dev_dir in (sysfs_rdma.netdev_dir(node / "sys", nic), sysfs_rdma.ibdev_dir(node / "sys", nic)):
        assert os.readlink(dev_dir / "device") == "../../../" + nic["pci_bus_id"]


def test_gid_table_and_types(node: Path) -> None:
    nic = nics(node)[0]
    port = sysfs_rdma.ibdev_dir(node / "sys", nic) / "ports" / "1"
    gid0 = (port / "gids" / "0").read_text().strip()
    assert gid0.startswith("fe80:0000:0000:0000:") and gid0 == sysfs_rdma.link_gid(nic["mac"])
    types = [(port / "gid_attrs" / "types" / str(i)).read_text().strip() for i in range(4)]
    assert types == ["IB/RoCE v1", "RoCE v2", "IB/RoCE v1", "RoCE v2"]


# ------------------------------------------------------------------ ibdev2netdev


def test_ibdev2netdev_round_trip(node: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(ibdev2netdev, [], node, capsys)
    assert code == 0
    entries = rdma_parse.parse_ibdev2netdev(out)
    assert [(e["ibdev"], e["netdev"], e["up"]) for e in entries] == [
        (n["ibdev"], n["netdev"], True) for n in nics(node)
    ]
    code, out, _ = run(ibdev2netdev, ["-v"], node, capsys)
    verbose = rdma_parse.parse_ibdev2netdev(out)
    assert [(e["pci_bus_id"], e["hca_type"], e["port_state"]) for e in verbose] == [
        (n["pci_bus_id"], "MT4131", "ACTIVE") for n in nics(node)
    ]


def test_ibdev2netdev_usage_and_no_driver(node: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(ibdev2netdev, ["-h"], node, capsys)
    assert (code, out.splitlines()[0]) == (0, "ibdev2netdev <options>")
    assert run(ibdev2netdev, ["-x"], node, capsys)[0] == 255
    for nic in nics(node):
        (node / "sys" / "class" / "net" / nic["netdev"] / "device" / "vendor").write_text("0x8086\n")
    assert run(ibdev2netdev, [], node, capsys)[:2] == (0, "")  # no Mellanox netdev: prints nothing
    os.rename(node / "sys" / "class" / "infiniband", node / "sys" / "class" / "infiniband.off")
    assert run(ibdev2netdev, [], node, capsys)[:2] == (255, "")


# ------------------------------------------------------------------ mlnx_qos


def test_mlnx_qos_show_round_trip(node: Path, capsys: pytest.CaptureFixture[str]) -> None:
    netdev = nics(node)[0]["netdev"]
    code, out, _ = run(mlnx_qos, ["-i", netdev], node, capsys)
    assert code == 0
    qos = rdma_parse.parse_mlnx_qos(out)
    assert (qos["trust"], qos["pfc"], qos["dcbx_mode"]) == ("dscp", TUNED_PFC, "OS controlled")
    assert qos["dscp2prio"][26] == 3 and len(qos["dscp2prio"]) == 64
    assert qos["prio_tc"] == {0: 1, 1: 0, 2: 2, 3: 3, 4: 4, 5: 5, 6: 6, 7: 7}
    assert "\tprio:0 dscp:07,06,05,04,03,02,01,00," in out.splitlines()  # the tool indents with tabs


def test_mlnx_qos_rows_match_the_real_capture(node: Path, capsys: pytest.CaptureFixture[str]) -> None:
    real = (FIXTURES / "mellanox" / "3fs-doc-mlnx_qos-ens4np0-cx7-ofed23.10.txt").read_text().splitlines()
    netdev = nics(node)[0]["netdev"]
    out = run(mlnx_qos, ["-i", netdev, "--pfc", "0,0,0,0,0,1,0,0"], node, capsys)[1]
    lines = [line.expandtabs() for line in out.splitlines()]  # as a terminal shows them
    start = lines.index("PFC configuration:")
    assert lines[start : start + 4] == real[real.index("PFC configuration:") :][:4]
    assert real[real.index("default priority:") + 1] in lines  # the receive buffer line
    labels = [line.split(":")[0] for line in lines if not line.startswith(" ")][:7]
    assert labels == [line.split(":")[0] for line in real if not line.startswith(" ")][:7]


def test_mlnx_qos_sets_pfc_and_trust(node: Path, capsys: pytest.CaptureFixture[str]) -> None:
    netdev = nics(node)[2]["netdev"]
    code, out, _ = run(mlnx_qos, ["-i", netdev, "--pfc", "0,0,0,0,0,0,0,0", "--trust", "pcp"], node, capsys)
    assert code == 0
    qos = rdma_parse.parse_mlnx_qos(out)
    assert (qos["pfc"], qos["trust"], qos["dscp2prio"]) == ([0] * 8, "pcp", {})
    assert (nics(node)[2]["pfc"], nics(node)[2]["trust"]) == ([0] * 8, "pcp")
    assert nics(node)[1]["pfc"] == TUNED_PFC  # only that interface
    run(mlnx_qos, ["-i", netdev, "--pfc=0,0,0,1,0,0,0,0", "--trust=dscp"], node, capsys)
    qos = rdma_parse.parse_mlnx_qos(run(mlnx_qos, ["-i", netdev], node, capsys)[1])
    assert (qos["pfc"], qos["trust"]) == (TUNED_PFC, "dscp")


@pytest.mark.parametrize(
    ("argv", "first_line"),
    [
        ([], "Interface name is required"),
        (["-i", "eth9"], "Priority trust state is not supported on your system"),
        (["-i", "eth9", "--pfc", "0,0,0,1,0,0,0,0"], "Netlink error: No such device (19)"),
        (["-i", "{netdev}", "--pfc", "0,0,0,1"], "pfc list must have 8 items"),
        (["-i", "{netdev}", "--pfc", "0,0,0,1,0,0,0,0,0"], "Too many items for PFC"),
        (["-i", "{netdev}", "--pfc", "0,0,0,2,0,0,0,0"], "Bad value for PFC: 2 is not in the range 0..1"),
        (["-i", "{netdev}", "--trust", "l2"], "Invalid trust state command. Refer to the help."),
    ],
)
def test_mlnx_qos_errors(
    node: Path, capsys: pytest.CaptureFixture[str], argv: list[str], first_line: str
) -> None:
    netdev = nics(node)[0]["netdev"]
    code, out, _ = run(mlnx_qos, [a.format(netdev=netdev) for a in argv], node, capsys)
    assert (code, out.splitlines()[0]) == (1, first_line)
    assert nics(node)[0]["pfc"] == TUNED_PFC and nics(node)[0]["trust"] == "dscp"
    with pytest.raises(rdma_parse.ParseError):
        rdma_parse.parse_mlnx_qos(out)


def test_mlnx_qos_unknown_interface_prints_what_each_step_prints(
    node: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = run(mlnx_qos, ["-i", "eth9"], node, capsys)[1]
    assert out.splitlines() == [
        "Priority trust state is not supported on your system",
        "Buffers commands are not supported on your system",
        "Rate limit is not supported on your system!",
        "ETS features are not supported on your system",
    ]


def test_mlnx_qos_bad_option_is_optparse_error(node: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(mlnx_qos, ["-i", "x", "--nope"], node, capsys)
    assert code == 2 and "mlnx_qos: error: no such option: --nope" in err


# ------------------------------------------------------------------ mlxlink


@pytest.mark.parametrize("device", ["mlx5_0", "0000:15:00.0", "15:00.0"])
def test_mlxlink_round_trip(node: Path, capsys: pytest.CaptureFixture[str], device: str) -> None:
    code, out, _ = run(mlxlink, ["-d", device], node, capsys)
    assert code == 0
    link = rdma_parse.parse_mlxlink(out)
    assert (link["state"], link["physical_state"], link["speed"], link["speed_gbps"], link["lanes"]) == (
        "Active",
        "LinkUp",
        "400G",
        400,
        4,
    )
    assert link["enabled_link_speed"]["speeds"] == ["800G_8X", "400G_4X", "200G_4X", "100G_4X"]
    assert link["enabled_link_speed"]["mask"] == (1 << 19) | (1 << 16) | (1 << 12) | (1 << 9)
    assert (link["status_opcode"], link["recommendation"]) == (0, "No issue was observed")
    assert link["firmware_version"] == nics(node)[0]["fw_version"]
    assert link["module"] is None


def test_mlxlink_show_module_and_layout(node: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = run(mlxlink, ["-d", "mlx5_1", "-p", "1", "--show_module"], node, capsys)[1]
    link = rdma_parse.parse_mlxlink(out)
    assert link["module"]["Identifier"] == "OSFP"
    real = (FIXTURES / "mellanox" / "gce-bugreport-mlxlink-gpu-nvlink-XDR-netir.txt").read_text().splitlines()
    # same key column as the real tool: "State" padded to 35 columns, then ": "
    assert (
        out.splitlines()[:4]
        == real[:4]
        == ["", "Operational Info", "-" * 16, "State" + " " * 30 + ": Active"]
    )


def test_mlxlink_down_link(node: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inject(node, "link-down")
    link = rdma_parse.parse_mlxlink(run(mlxlink, ["-d", "mlx5_7"], node, capsys)[1])
    assert (link["state"], link["speed"], link["speed_gbps"], link["width"]) == ("Disable", None, None, None)
    assert (link["status_opcode"], link["group_opcode"], link["recommendation"]) == (
        1024,
        "MNG FW",
        "Cable is unplugged",
    )
    assert link["supported_cable_speed"] is None
    assert rdma_parse.parse_mlxlink(run(mlxlink, ["-d", "mlx5_6"], node, capsys)[1])["state"] == "Active"


def test_mlxlink_unknown_device(node: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(mlxlink, ["-d", "mlx5_9"], node, capsys)
    assert (code, out) == (1, "")
    assert err.strip() == '-E- Failed to open device: "mlx5_9", No such file or directory'


# ------------------------------------------------------------------ mlxconfig


def test_mlxconfig_query_round_trip(node: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(mlxconfig, ["-d", "0000:15:00.0", "q"], node, capsys)
    assert code == 0
    (device,) = rdma_parse.parse_mlxconfig_query(out)
    assert (device["device_type"], device["device"], device["columns"]) == (
        "ConnectX8",
        "0000:15:00.0",
        ["next_boot"],
    )
    assert device["params"]["LINK_TYPE_P1"] == {"next_boot": "ETH(2)"}
    assert rdma_parse.mlxconfig_value(device["params"]["CNP_DSCP_P1"]["next_boot"]) == ("48", 48)
    # the real layout: 8-space indent, names padded to 44, values to 20
    assert "        LINK_TYPE_P1                                ETH(2)              " in out.splitlines()
    assert "Device type:        ConnectX8           " in out.splitlines()


def test_mlxconfig_set_link_type_is_pending_until_reset(
    node: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(mlxconfig, ["-y", "-d", "mlx5_0", "set", "LINK_TYPE_P1=IB"], node, capsys)
    assert code == 0
    result = rdma_parse.parse_mlxconfig_set(out)
    assert (result["answer"], result["applied"], result["reboot_required"]) == ("y", True, True)
    assert result["devices"][0]["params"] == {"LINK_TYPE_P1": {"next_boot": "ETH(2)", "new": "IB(1)"}}
    nic = nics(node)[0]
    assert (nic["link_type"], nic["pending_link_type"]) == ("eth", "ib")
    (device,) = rdma_parse.parse_mlxconfig_query(
        run(mlxconfig, ["-d", "mlx5_0", "q", "LINK_TYPE_P1"], node, capsys)[1]
    )
    assert device["params"] == {"LINK_TYPE_P1": {"next_boot": "IB(1)"}}
    (device,) = rdma_parse.parse_mlxconfig_query(
        run(mlxconfig, ["-e", "-d", "mlx5_0", "q", "LINK_TYPE_P1"], node, capsys)[1]
    )
    assert device["params"]["LINK_TYPE_P1"] == {
        "default": "ETH(2)",
        "current": "ETH(2)",
        "next_boot": "IB(1)",
        "modified": True,
    }
    run(mlxconfig, ["-d", "mlx5_0", "--yes", "set", "LINK_TYPE_P1=2"], node, capsys)
    assert nics(node)[0]["pending_link_type"] == "eth"


def test_mlxconfig_all_devices_without_d(node: Path, capsys: pytest.CaptureFixture[str]) -> None:
    devices = rdma_parse.parse_mlxconfig_query(run(mlxconfig, ["q"], node, capsys)[1])
    assert [d["device"] for d in devices] == [n["pci_bus_id"] for n in nics(node)]
    assert [d["index"] for d in devices] == list(range(1, 9))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-d", "mlx5_9", "q"], "-E- Failed to open the device"),
        (["-d", "mlx5_0", "q", "NO_SUCH_PARAM"], "-E- The Device doesn't support NO_SUCH_PARAM parameter"),
        (["-y", "-d", "mlx5_0", "set", "LINK_TYPE_P1=FOO"], "-E- Bad value FOO for parameter LINK_TYPE_P1"),
        (
            ["-y", "-d", "mlx5_0", "set", "NO_SUCH_PARAM=1"],
            "-E- The Device doesn't support NO_SUCH_PARAM parameter",
        ),
    ],
)
def test_mlxconfig_errors(
    node: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, _ = run(mlxconfig, argv, node, capsys)
    assert code == 1 and out.splitlines()[-1] == message
    with pytest.raises(rdma_parse.ParseError):
        rdma_parse.parse_mlxconfig_query(out)
    assert nics(node)[0]["pending_link_type"] is None


# ------------------------------------------------------------------ cma_roce_mode


def test_cma_roce_mode_show_and_set(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(cma_roce_mode, ["-d", "mlx5_3", "-p", "1"], root, capsys)
    assert (code, out, rdma_parse.parse_cma_roce_mode(out)) == (0, "RoCE v2\n", "v2")
    out = run(cma_roce_mode, ["-d", "mlx5_3", "-p", "1", "-m", "1"], root, capsys)[1]
    assert (out, rdma_read.read_roce_mode("mlx5_3", 1), rdma_read.read_roce_mode("mlx5_2", 1)) == (
        "IB/RoCE v1\n",
        "v1",
        "v2",
    )
    assert (
        run(cma_roce_mode, ["-d", "mlx5_3", "-m", "2"], root, capsys)[1] == "RoCE v2\n"
    )  # port defaults to 1
    assert rdma_read.read_roce_mode("mlx5_3", 1) == "v2"


def test_cma_roce_mode_defaults_and_errors(node: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(cma_roce_mode, [], node, capsys)[:2] == (0, "RoCE v2\n")  # mlx5_0 port 1
    code, out, _ = run(cma_roce_mode, ["-h"], node, capsys)
    assert code == 0 and out.startswith("Set/Show RoCE default mode of RDMA_CM applications")
    assert run(cma_roce_mode, ["-d", "mlx5_0", "-p", "2"], node, capsys)[:2] == (
        1,
        "Device mlx5_0 port 2 does not exist\n",
    )
    assert run(cma_roce_mode, ["-d", "mlx5_9"], node, capsys)[:2] == (
        1,
        "Failed to create configuration for mlx5_9\n",
    )


def test_cma_roce_mode_recreates_a_removed_group(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    group = root / "sys" / "kernel" / "config" / "rdma_cm" / "mlx5_4"
    for path in sorted(group.rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    group.rmdir()
    assert run(cma_roce_mode, ["-d", "mlx5_4"], root, capsys)[:2] == (0, "RoCE v2\n")
    assert rdma_read.read_roce_tos("mlx5_4", 1) == 0  # the kernel's default ToS in a new group


# ------------------------------------------------------------------ faults


def test_pfc_off_and_clear(node: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inject(node, "pfc-off")
    for nic in nics(node):
        assert (
            rdma_parse.parse_mlnx_qos(run(mlnx_qos, ["-i", nic["netdev"]], node, capsys)[1])["pfc_enabled"]
            == []
        )
    inject(node, "pfc-off", clear=True)
    assert {tuple(n["pfc"]) for n in nics(node)} == {tuple(TUNED_PFC)}


def test_ecn_off_and_clear(root: Path) -> None:
    inject(root, "ecn-off")
    for nic in nics(root):
        ecn = rdma_read.read_ecn(nic["netdev"])
        assert (ecn["np"], ecn["rp"], ecn["cnp_dscp"]) == ([False] * 8, [False] * 8, 48)
    inject(root, "ecn-off", clear=True)
    assert {tuple(rdma_read.read_ecn(n["netdev"])["np"]) for n in nics(root)} == {
        tuple(p == 3 for p in range(8))
    }


def test_roce_v1_and_clear(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inject(root, "roce-v1")
    assert {rdma_read.read_roce_mode(n["ibdev"], 1) for n in nics(root)} == {"v1"}
    assert run(cma_roce_mode, ["-d", "mlx5_5"], root, capsys)[1] == "IB/RoCE v1\n"
    inject(root, "roce-v1", clear=True)
    assert {rdma_read.read_roce_mode(n["ibdev"], 1) for n in nics(root)} == {"v2"}


def test_link_down_and_clear(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inject(root, "link-down")
    last = nics(root)[-1]
    assert (last["ibdev"], last["link_up"]) == ("mlx5_7", False)
    entries = rdma_parse.parse_ibdev2netdev(run(ibdev2netdev, [], root, capsys)[1])
    assert [e["ibdev"] for e in entries if not e["up"]] == ["mlx5_7"]
    port = rdma_read.read_ib_port("mlx5_7", 1)
    assert (port["state"], port["phys_state"], port["rate"]) == ("DOWN", "Disabled", "40 Gb/sec (4X QDR)")
    net = rdma_read.read_netdev(last["netdev"])
    assert (net["operstate"], net["carrier"], net["speed_mbps"]) == ("down", False, None)
    inject(root, "link-down", clear=True)
    assert rdma_read.read_ib_port("mlx5_7", 1)["state"] == "ACTIVE"
    assert all(e["up"] for e in rdma_parse.parse_ibdev2netdev(run(ibdev2netdev, [], root, capsys)[1]))


def test_fault_names_are_the_contract() -> None:
    assert sorted(faults_rdma.FAULTS) == ["ecn-off", "link-down", "pfc-off", "roce-v1"]
