"""The verdicts on a RoCE link end to end (module_utils/fabric/fabric_judge.py): cabling from LLDP (the real
lldpctl capture first), then the switch side of lossless RoCE on the simulated leaf's NVUE trees, with
each switch fault the simulator will inject: PFC off, ECN off, a lossy DSCP map, a low MTU."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.fabric import fabric_judge, lldp
from gpufleet_sim import nvue_state

LLDP_CAPTURE = "lldp/unifabric-5nic-sonic-leaves-lldpctl-json0.json"
HOST = {"roce_dscp": 26, "cnp_dscp": 48, "priority": 3, "mtu": 4200}
LABEL = fabric_judge.link_label("node01", "mlx5_3", "leaf02", "swp14")


def judged(qos: dict[str, Any], interface: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    checks = fabric_judge.judge_switch_port(LABEL, HOST, qos, interface or nvue_state.default_interface())
    return {c["name"].split("[")[0]: c for c in checks}


def failed(qos: dict[str, Any], interface: dict[str, Any] | None = None) -> set[str]:
    return {name for name, c in judged(qos, interface).items() if not c["ok"]}


def test_the_real_capture_cabling_is_judged_against_the_plan(read_fixture) -> None:
    found = lldp.parse_lldpctl(read_fixture(LLDP_CAPTURE))
    first = next(iter(found))
    neighbour = lldp.neighbour_of(found, first)
    ok = fabric_judge.judge_neighbor("mlx5_0", "StorageSW:Ethernet120", neighbour)
    assert (ok["ok"], ok["value"]) == (True, "StorageSW:Ethernet120")
    swapped = fabric_judge.judge_neighbor("mlx5_0", "StorageSW:Ethernet121", neighbour)
    assert not swapped["ok"] and swapped["limit"] == "StorageSW:Ethernet121"
    assert "cabled to StorageSW:Ethernet120, the plan says StorageSW:Ethernet121" in swapped["message"]
    missing = fabric_judge.judge_neighbor("mlx5_0", "leaf02:swp14", None)
    assert not missing["ok"] and missing["value"] is None and "no LLDP neighbour" in missing["message"]


def test_a_crossed_pair_is_named_as_one_and_a_lone_misplaced_cable_is_not() -> None:
    def heard(ibdev: str, found: str, planned: str) -> dict[str, Any]:
        leaf, port = found.split(":")
        return fabric_judge.judge_neighbor(ibdev, planned, {"chassis_name": leaf, "port_id": port})

    checks = fabric_judge.name_swapped_pairs(
        [
            heard("mlx5_6", "leaf02:swp8", "leaf02:swp7"),
            heard("mlx5_7", "leaf02:swp7", "leaf02:swp8"),
            heard("mlx5_8", "leaf02:swp1", "leaf02:swp9"),  # on another node's port: no partner here
            heard("mlx5_9", "leaf02:swp10", "leaf02:swp10"),
        ]
    )
    messages = [c["message"] for c in checks]
    assert messages[0] == (
        "mlx5_6 is cabled to leaf02:swp8, the plan says leaf02:swp7: "
        "crossed with mlx5_7 (swap the two cables)"
    )
    assert messages[1] == (
        "mlx5_7 is cabled to leaf02:swp7, the plan says leaf02:swp8: "
        "crossed with mlx5_6 (swap the two cables)"
    )
    assert messages[2].endswith("(a swapped or misplaced cable)")
    assert messages[3] == "mlx5_9 is cabled to leaf02:swp10 as planned"
    # three cables rotated are no pair: each is named on its own
    rotated = fabric_judge.name_swapped_pairs(
        [heard("a", "l:2", "l:1"), heard("b", "l:3", "l:2"), heard("c", "l:1", "l:3")]
    )
    assert all(c["message"].endswith("(a swapped or misplaced cable)") for c in rotated)


def test_a_leaf_with_the_lossless_profile_passes_every_check() -> None:
    checks = judged(nvue_state.default_qos())
    assert set(checks) == {
        "fabric.switch_dscp",
        "fabric.switch_pfc",
        "fabric.switch_ecn",
        "fabric.cnp_priority",
        "fabric.switch_mtu",
    }
    assert all(c["ok"] for c in checks.values()), checks
    assert all(c["name"].endswith("[node01:mlx5_3 -> leaf02:swp14]") for c in checks.values())


def _qos() -> dict[str, Any]:
    return nvue_state.default_qos()


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ("switch-pfc-off", {"fabric.switch_pfc"}),
        ("switch-ecn-off", {"fabric.switch_ecn"}),
        ("switch-dscp-lossy", {"fabric.switch_dscp"}),
        ("trust-pcp-only", {"fabric.switch_dscp", "fabric.cnp_priority"}),
        ("cnp-with-roce", {"fabric.cnp_priority"}),
        ("pfc-rx-off", {"fabric.switch_pfc"}),
    ],
)
def test_each_switch_fault_fails_its_own_check(fault: str, expected: set[str]) -> None:
    qos = _qos()
    profile = "default-global"
    if fault == "switch-pfc-off":
        qos["pfc"][profile]["switch-priority"] = {}
    elif fault == "switch-ecn-off":
        qos["congestion-control"][profile]["traffic-class"]["3"]["ecn"] = "disable"
    elif fault == "switch-dscp-lossy":
        qos["mapping"][profile]["dscp"]["26"]["switch-priority"] = 1
    elif fault == "trust-pcp-only":
        qos["mapping"][profile]["trust"] = "l2"
    elif fault == "cnp-with-roce":
        qos["mapping"][profile]["dscp"]["48"]["switch-priority"] = 3
    elif fault == "pfc-rx-off":
        qos["pfc"][profile]["rx"] = "disable"
    assert failed(qos) == expected


def test_a_low_switch_mtu_names_both_sides() -> None:
    mtu = judged(_qos(), nvue_state.default_interface(mtu=1500))["fabric.switch_mtu"]
    assert (mtu["ok"], mtu["value"], mtu["limit"]) == (False, 1500, 4200)
    assert mtu["message"] == "node01:mlx5_3 -> leaf02:swp14: switch port MTU 1500, host MTU 4200"


def test_the_messages_carry_both_ends_of_a_lossy_map() -> None:
    qos = _qos()
    qos["mapping"]["default-global"]["dscp"]["26"]["switch-priority"] = 1
    dscp = judged(qos)["fabric.switch_dscp"]
    assert (dscp["value"], dscp["limit"]) == ("priority 1", "priority 3")
    assert (
        "RoCE DSCP 26 on priority 1, the host sends it on PFC priority 3 (a lossy class)" in dscp["message"]
    )
