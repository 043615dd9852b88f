"""rdma_judge: the comparisons and plans behind rdma_link and rdma_qos, table-driven; and the
`ethtool -a` parser they read global pause with (module_utils.rdma.rdma_parse)."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.rdma import rdma_judge as rd
from ansible_collections.gpufleet.node.plugins.module_utils.rdma import rdma_parse, rdma_read
from gpufleet_sim.tools import ethtool

ON3 = [1 if p == 3 else 0 for p in range(8)]
TUNED = {"global_pause": False, "trust": "dscp", "pfc": [3], "ecn_np": [3], "ecn_rp": [3], "cnp_dscp": 48}


# ------------------------------------------------------------------ values and priorities


@pytest.mark.parametrize(
    ("values", "allowed", "bad"),
    [
        ([3], rd.PRIORITIES, []),
        ([0, 7], rd.PRIORITIES, []),
        ([3, 8], rd.PRIORITIES, [8]),
        ([-1, 3], rd.PRIORITIES, [-1]),
        ([True], rd.PRIORITIES, [True]),  # a YAML `yes` is not priority 1
        (["3"], rd.PRIORITIES, ["3"]),
        (None, rd.PRIORITIES, []),
        ([63, 64], rd.DSCP_RANGE, [64]),
    ],
)
def test_bad_values(values: list[Any] | None, allowed: range, bad: list[Any]) -> None:
    assert rd.bad_values(values, allowed) == bad


def test_priority_flags_round_trip() -> None:
    assert rd.priority_flags([3]) == ON3
    assert rd.priority_flags([]) == [0] * 8
    assert rd.enabled_priorities(ON3) == [3]
    assert rd.enabled_priorities([False, True] + [False] * 5 + [True]) == [1, 7]
    assert rd.enabled_priorities(None) is None


# ------------------------------------------------------------------ rdma_qos


@pytest.mark.parametrize(
    ("current", "desired", "expected"),
    [
        (TUNED, TUNED, []),
        ({**TUNED, "pfc": []}, TUNED, [("pfc", [], [3])]),
        ({**TUNED, "ecn_np": [], "ecn_rp": []}, TUNED, [("ecn_np", [], [3]), ("ecn_rp", [], [3])]),
        ({**TUNED, "trust": "pcp", "cnp_dscp": 0}, TUNED, [("trust", "pcp", "dscp"), ("cnp_dscp", 0, 48)]),
        (
            {**TUNED, "global_pause": True, "pfc": []},
            TUNED,
            [("global_pause", True, False), ("pfc", [], [3])],
        ),
        # a setting not asked for is not compared
        ({**TUNED, "ecn_np": []}, {"trust": "dscp", "pfc": [3]}, []),
        ({**TUNED, "pfc": [3, 5]}, {"pfc": [3]}, [("pfc", [3, 5], [3])]),
    ],
)
def test_qos_changes(
    current: dict[str, Any], desired: dict[str, Any], expected: list[tuple[str, Any, Any]]
) -> None:
    assert rd.qos_changes("ens21np0", current, desired) == [
        {"setting": f"rdma_qos.{name}[ens21np0]", "from": before, "to": after}
        for name, before, after in expected
    ]


@pytest.mark.parametrize(
    ("current", "desired", "args"),
    [
        (TUNED, TUNED, []),
        ({**TUNED, "pfc": []}, TUNED, ["--pfc", "0,0,0,1,0,0,0,0"]),
        ({**TUNED, "trust": "pcp"}, TUNED, ["--trust", "dscp"]),
        ({"trust": "pcp", "pfc": []}, TUNED, ["--trust", "dscp", "--pfc", "0,0,0,1,0,0,0,0"]),
        ({}, {"trust": None, "pfc": [3, 4]}, ["--pfc", "0,0,0,1,1,0,0,0"]),
        (TUNED, {"ecn_np": [3]}, []),
    ],
)
def test_mlnx_qos_args(current: dict[str, Any], desired: dict[str, Any], args: list[str]) -> None:
    assert rd.mlnx_qos_args(current, desired) == args


def test_ecn_writes_only_what_differs_or_everything_for_boot() -> None:
    current = {"ecn_np": [], "ecn_rp": [3], "cnp_dscp": 48}
    assert rd.ecn_writes("/e", current, TUNED) == [("/e/roce_np/enable/3", "1")]
    assert rd.ecn_writes("/e", {**current, "ecn_rp": [3, 4], "cnp_dscp": 0}, TUNED) == [
        ("/e/roce_np/enable/3", "1"),
        ("/e/roce_rp/enable/4", "0"),
        ("/e/roce_np/cnp_dscp", "48"),
    ]
    boot = rd.ecn_writes("/e", {}, TUNED, only_changed=False)
    assert len(boot) == 17 and boot[-1] == ("/e/roce_np/cnp_dscp", "48")
    assert rd.ecn_writes("/e", {}, {"pfc": [3]}, only_changed=False) == []


def test_nvue_snippet_follows_the_plan() -> None:
    assert rd.nvue_snippet({"trust": "pcp", "pfc": [3, 4]})[1:] == [
        "nv set qos roce mode lossless",
        "nv set qos mapping default-global trust l2",
        "nv set qos pfc default-global switch-priority 3,4",
        "nv config apply",
    ]
    assert "traffic-class 3 ecn enable" in rd.nvue_snippet(TUNED)[4]


# ------------------------------------------------------------------ rdma_link


NAMES: dict[str, str | None] = {"mlx5_0": "ens21np0", "mlx5_1": "ens38np0", "mlx5_2": None}


@pytest.mark.parametrize(
    ("wanted", "chosen", "unknown"),
    [
        ([], ["mlx5_0", "mlx5_1", "mlx5_2"], []),
        (None, ["mlx5_0", "mlx5_1", "mlx5_2"], []),
        (["ens38np0", "mlx5_0"], ["mlx5_0", "mlx5_1"], []),
        (["mlx5_1", "ens38np0"], ["mlx5_1"], []),
        (["eth9", "mlx5_0"], ["mlx5_0"], ["eth9"]),
    ],
)
def test_select_ports(wanted: list[str] | None, chosen: list[str], unknown: list[str]) -> None:
    assert rd.select_ports(NAMES, wanted) == (chosen, unknown)


@pytest.mark.parametrize(
    ("bdf", "param"),
    [("0000:15:00.0", "LINK_TYPE_P1"), ("0000:15:00.1", "LINK_TYPE_P2"), (None, "LINK_TYPE_P1")],
)
def test_mlxconfig_link_param(bdf: str | None, param: str) -> None:
    assert rd.mlxconfig_link_param(bdf) == param


@pytest.mark.parametrize(
    ("raw", "name"),
    [
        ("ETH(2)", "eth"),
        ("IB(1)", "ib"),
        ("VPI(3)", "vpi"),
        ("2", "eth"),
        ("1", "ib"),
        (None, None),
        ("X", None),
    ],
)
def test_link_type_name(raw: str | None, name: str | None) -> None:
    assert rd.link_type_name(raw) == name


@pytest.mark.parametrize(
    ("layer", "next_boot", "change", "set_it", "reboot"),
    [
        ("Ethernet", "eth", None, False, False),
        ("Ethernet", "ib", ("ib", "eth"), True, False),  # pending IB set back: nothing to reboot for
        ("InfiniBand", "ib", ("ib", "eth"), True, True),
        ("InfiniBand", "eth", None, False, True),  # already pending: a reboot, not a change
        ("Ethernet", "vpi", ("vpi", "eth"), True, False),
        ("Ethernet", None, None, False, False),  # Ethernet-only NIC
    ],
)
def test_link_type_plan(
    layer: str, next_boot: str | None, change: tuple[str, str] | None, set_it: bool, reboot: bool
) -> None:
    plan = rd.link_type_plan("mlx5_0", layer, next_boot, "eth")
    expected = (
        None if change is None else {"setting": "rdma_link.link_type[mlx5_0]", "from": change[0], "to": "eth"}
    )
    assert (plan["change"], plan["set"], plan["reboot_required"]) == (expected, set_it, reboot)
    assert (plan["hint"] is not None) == reboot


def test_link_type_plan_without_the_setting_on_the_wrong_type() -> None:
    plan = rd.link_type_plan("mlx5_0", "InfiniBand", None, "eth")
    assert plan["change"] is None and not plan["reboot_required"]
    assert plan["hint"] == "mlx5_0 runs ib and its firmware has no LINK_TYPE setting; it cannot be made eth"


UP = {"state": "ACTIVE", "phys_state": "LinkUp", "rate_gbps": 400}
DOWN = {"state": "DOWN", "phys_state": "Disabled", "rate_gbps": 40}


def test_link_checks_up_fast() -> None:
    checks = rd.link_checks("mlx5_0", "ens21np0", UP, 400000, 400)
    assert [(c["name"], c["ok"], c["value"], c["limit"]) for c in checks] == [
        ("rdma_link.link_state[mlx5_0]", True, "ACTIVE", "ACTIVE"),
        ("rdma_link.speed_gbps[mlx5_0]", True, 400, 400),
    ]


def test_link_checks_up_slow_and_speed_from_rate() -> None:
    [_, slow] = rd.link_checks("mlx5_0", "ens21np0", UP, 200000, 400)
    assert (slow["ok"], slow["value"]) == (False, 200)
    [_, rate] = rd.link_checks("mlx5_0", None, UP, None, 400)
    assert (rate["ok"], rate["value"]) == (True, 400)
    assert len(rd.link_checks("mlx5_0", None, UP, None, 0)) == 1


def test_link_checks_down_is_one_named_failure() -> None:
    [down] = rd.link_checks("mlx5_7", "ens200np0", DOWN, None, 400, "Cable is unplugged")
    assert (down["name"], down["ok"], down["value"]) == ("rdma_link.link_state[mlx5_7]", False, "DOWN")
    assert down["message"].startswith("mlx5_7 (ens200np0) link is DOWN (physical state Disabled)")
    assert down["message"].endswith("(mlxlink: Cable is unplugged)")
    [polling] = rd.link_checks("mlx5_7", None, {"state": "ACTIVE", "phys_state": "Polling"}, None, 0)
    assert polling["ok"] is False


def test_boot_lines_are_quoted() -> None:
    assert rd.boot_line(["/usr/bin/mlnx_qos", "-i", "ens21np0", "--pfc", "0,0,0,1,0,0,0,0"]) == (
        "/usr/bin/mlnx_qos -i ens21np0 --pfc 0,0,0,1,0,0,0,0"
    )
    assert rd.boot_line(["echo", "a b"]) == "echo 'a b'"
    assert rd.write_line("/sys/class/net/x y/mtu", "4200") == "echo 4200 > '/sys/class/net/x y/mtu'"


# ------------------------------------------------------------------ ethtool -a


# ethtool 5.x, netlink path, as in the kernel's pause netlink series (netdev, 2020): autoneg on.
PAUSE_NETLINK = (
    "Pause parameters for eth0:\nAutonegotiate:\ton\nRX:\t\ton\nTX:\t\ton\n"
    "RX negotiated: on\nTX negotiated: on\n"
)


@pytest.mark.parametrize(
    ("text", "pause"),
    [
        (PAUSE_NETLINK, {"autoneg": True, "rx": True, "tx": True}),
        (
            "Pause parameters for eth0:\nAutonegotiate:  off\nRX:             off\nTX:             off\n",
            {"autoneg": False, "rx": False, "tx": False},
        ),
        (PAUSE_NETLINK + "Statistics:\n  tx_pause_frames: 0\n", {"autoneg": True, "rx": True, "tx": True}),
        (ethtool.render("ens21np0", {"rx": True, "tx": False}), {"autoneg": False, "rx": True, "tx": False}),
    ],
)
def test_parse_ethtool_pause(text: str, pause: dict[str, bool]) -> None:
    assert rdma_parse.parse_ethtool_pause(text) == pause


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Pause parameters for wlan0:\nCannot get device pause settings: Operation not supported\n",
        "Pause parameters for eth0:\nAutonegotiate:\toff\nRX:\t\toff\n",
        "Pause parameters for eth0:\nAutonegotiate:\toff\nRX:\t\tmaybe\nTX:\t\toff\n",
        "Settings for eth0:\n",
    ],
)
def test_parse_ethtool_pause_refuses_what_it_cannot_read(text: str) -> None:
    with pytest.raises(rdma_parse.ParseError) as excinfo:
        rdma_parse.parse_ethtool_pause(text)
    assert str(excinfo.value).startswith("ethtool -a")


def test_sysfs_path_follows_the_root(monkeypatch: pytest.MonkeyPatch) -> None:
    assert rdma_read.sysfs_path("class", "net", "eth0", "mtu", root="/") == "/sys/class/net/eth0/mtu"
    monkeypatch.setattr(rdma_read, "SYSFS_ROOT", "/tmp/node")
    assert rdma_read.sysfs_path("class", "net") == "/tmp/node/sys/class/net"
