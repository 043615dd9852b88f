"""The simulated RoCE counters (sim/roce_traffic.py, `ethtool -S` and sysfs hw_counters): each condition
of a port's path moves the counters it should and not the others, read back with gpufleet's own
parser and judged with its judge (module_utils/rdma/roce_counters.py, tested on the real captures first).

A fleet directory in tmp_path: node01 (built by sim/build.py, its sysfs rendered) and its two leaves
(sim/nvue.prepare), whose NVUE trees a test edits as the switch faults do.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.rdma import roce_counters
from gpufleet_sim import build, nvue, nvue_state, roce_traffic, state, sysfs, sysfs_rdma, thermal
from gpufleet_sim.tools import ethtool

T0 = 1_000_000.0
WINDOW = 10.0
RETRANSMITS = (*roce_counters.RETRANSMIT_COUNTERS, "roce_adp_retrans_to", "duplicate_request")
ECN = roce_counters.ECN_LOOP_COUNTERS
RX_PAUSE = ("rx_prio3_pause", "rx_prio3_pause_duration")
TX_PAUSE = ("tx_prio3_pause", "tx_prio3_pause_duration")
QP = roce_counters.QP_FAILURE_COUNTERS


class Fleet:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.node = root / "nodes" / "node01"
        self.node.mkdir(parents=True)
        built = build.build_node_state("node01", "b300-16", 1)
        state.save(self.node, built)
        sysfs.render(self.node / "sys", built)
        for leaf in ("leaf01", "leaf02"):
            nvue.prepare(root / "leaves", leaf, "127.0.0.2", ports=build.LEAF_PORTS)

    def nics(self) -> list[dict[str, Any]]:
        nics: list[dict[str, Any]] = state.load(self.node)["nics"]
        return nics

    def leaf(self, name: str, edit: Callable[[dict[str, Any]], None]) -> None:
        with nvue_state.locked(self.root / "leaves" / f"{name}.json") as leaf_state:
            edit(leaf_state["applied"])

    def load(self, requests: int, now: float) -> None:
        """``requests`` in flight on every GPU from ``now`` on (the fake vLLM's change_load)."""
        with state.locked(self.node) as node:
            thermal.change_load(node, [g["uuid"] for g in node["gpus"]], requests, now)

    def reading(self, nic: dict[str, Any], now: float) -> dict[str, int]:
        """One reading as gpufleet takes it: ethtool -S, then the port's hw_counters files."""
        text = roce_traffic.read(self.node, nic["netdev"], now)
        assert text is not None
        counters = roce_counters.parse_ethtool_stats(text)
        hw = sysfs_rdma.hw_counters_dir(self.node / "sys", nic)
        for path in sorted(hw.iterdir()):
            assert path.name not in counters
            counters[path.name] = int(path.read_text(encoding="utf-8"))
        return counters

    def window(self, requests: int = 4) -> dict[str, tuple[dict[str, int], dict[str, int]]]:
        """Every port read at idle, then after WINDOW seconds of ``requests`` per GPU."""
        nics = self.nics()
        before = {n["ibdev"]: self.reading(n, T0) for n in nics}
        self.load(requests, T0)
        after = {n["ibdev"]: self.reading(n, T0 + WINDOW) for n in nics}
        return {ibdev: (before[ibdev], after[ibdev]) for ibdev in before}


@pytest.fixture
def fleet(tmp_path: Path) -> Fleet:
    return Fleet(tmp_path / "fleet")


def grew(pair: tuple[dict[str, int], dict[str, int]], names: tuple[str, ...]) -> dict[str, int]:
    before, after = pair
    return {n: after[n] - before[n] for n in names if n in after}


def failed(ibdev: str, pair: tuple[dict[str, int], dict[str, int]]) -> list[str]:
    checks = roce_counters.judge_port(ibdev, pair[0], pair[1], WINDOW)
    return sorted(c["name"].split("[")[0] for c in checks if not c["ok"])


# -------------------------------------------------------------- the switch faults, as the leaf's tree


def pfc_off(tree: dict[str, Any]) -> None:
    del tree["qos"]["pfc"]["default-global"]["switch-priority"]["3"]


def ecn_off(tree: dict[str, Any]) -> None:
    tree["qos"]["congestion-control"]["default-global"]["traffic-class"]["3"]["ecn"] = "disable"


def dscp_lossy(tree: dict[str, Any]) -> None:
    tree["qos"]["mapping"]["default-global"]["dscp"]["26"] = {"switch-priority": 0}


def mtu_low(tree: dict[str, Any]) -> None:
    for port in tree["interface"].values():
        port["link"]["mtu"] = 1500


# condition -> (counters that grow, counters that stay, the judge's failed checks)
CASES: dict[str, tuple[Any, tuple[str, ...], tuple[str, ...], list[str]]] = {
    "healthy": (None, (*ECN, *RX_PAUSE, *TX_PAUSE), (*RETRANSMITS, *QP, "rx_discards_phy"), []),
    "switch-pfc-off": (
        pfc_off,
        (*RETRANSMITS, "rx_discards_phy", *ECN, *TX_PAUSE),
        (*RX_PAUSE, *QP),
        ["fabric.retransmits", "fabric.rx_discards"],
    ),
    "switch-ecn-off": (
        ecn_off,
        (*RX_PAUSE, *TX_PAUSE),
        (*ECN, *RETRANSMITS, *QP, "rx_discards_phy"),
        ["fabric.ecn_loop", "fabric.pause_duration"],
    ),
    "switch-dscp-lossy": (
        dscp_lossy,
        # DSCP 26 lands in the lossy class 0, which the leaf still marks (ECN on tc 0)
        (*RETRANSMITS, "rx_discards_phy", *ECN),
        (*RX_PAUSE, *QP),
        ["fabric.retransmits", "fabric.rx_discards"],
    ),
    "switch-mtu-low": (
        mtu_low,
        (
            "local_ack_timeout_err",
            "roce_adp_retrans",
            "roce_adp_retrans_to",
            "req_transport_retries_exceeded",
        ),
        ("out_of_sequence", "packet_seq_err", "rx_discards_phy", "rnr_nak_retry_err"),
        ["fabric.qp_failures", "fabric.retransmits"],
    ),
}


@pytest.mark.parametrize("condition", list(CASES))
def test_each_switch_condition_moves_its_counters_on_that_leafs_ports_only(
    fleet: Fleet, condition: str
) -> None:
    edit, moving, still, verdict = CASES[condition]
    if edit is not None:
        fleet.leaf("leaf01", edit)
    readings = fleet.window()
    nics = fleet.nics()
    on_leaf01 = [n["ibdev"] for n in nics if n["neighbor"]["chassis"] == "leaf01"]
    on_leaf02 = [n["ibdev"] for n in nics if n["neighbor"]["chassis"] == "leaf02"]
    assert len(on_leaf01) == len(on_leaf02) == 4
    for ibdev in on_leaf01:
        pair = readings[ibdev]
        assert all(grew(pair, moving).values()), (ibdev, grew(pair, moving))
        assert set(grew(pair, moving)) == set(moving)
        assert not any(grew(pair, still).values()), (ibdev, grew(pair, still))
        assert failed(ibdev, pair) == verdict
    for ibdev in on_leaf02:  # the other leaf is healthy
        assert failed(ibdev, readings[ibdev]) == []
        assert not any(grew(readings[ibdev], RETRANSMITS).values())


def test_healthy_port_under_load(fleet: Fleet) -> None:
    nic = fleet.nics()[0]
    pair = fleet.window()[nic["ibdev"]]
    checks = {c["name"]: c for c in roce_counters.judge_port(nic["ibdev"], *pair, WINDOW)}
    assert all(c["ok"] for c in checks.values())
    # PFC pauses now and then (2 % of the time received at this load, well under the 10 % limit),
    # congestion control at work, data moving at about 40 % of 800 Gb/s
    assert 1.0 < checks[f"fabric.pause_duration[{nic['ibdev']}]"]["value"] < 3.0
    assert checks[f"fabric.ecn_loop[{nic['ibdev']}]"]["value"] > 1000
    assert checks[f"fabric.host_pfc[{nic['ibdev']}]"]["value"] is True
    rx_gbps = (pair[1]["rx_bytes_phy"] - pair[0]["rx_bytes_phy"]) * 8 / WINDOW / 1e9
    assert 0.3 * nic["speed_gbps"] < rx_gbps <= 0.4 * nic["speed_gbps"]


def test_idle_node_moves_nothing(fleet: Fleet) -> None:
    nic = fleet.nics()[0]
    first = fleet.reading(nic, T0)
    assert fleet.reading(nic, T0 + 3600) == first
    assert set(first.values()) == {0}


def test_load_decays_after_the_requests_end(fleet: Fleet) -> None:
    nic = fleet.nics()[0]
    fleet.reading(nic, T0)
    fleet.load(4, T0)
    busy = fleet.reading(nic, T0 + WINDOW)
    fleet.load(-4, T0 + WINDOW)
    later = fleet.reading(nic, T0 + WINDOW + 600)  # ten minutes after: traffic gone
    assert later["rx_bytes_phy"] - busy["rx_bytes_phy"] < busy["rx_bytes_phy"] / 1000


def test_host_pfc_off_prints_no_priority_3_pause_counters(fleet: Fleet) -> None:
    with state.locked(fleet.node) as node:
        node["nics"][0]["pfc"] = [0] * 8  # the node fault pfc-off, on one port
    nics = fleet.nics()
    readings = fleet.window()
    off = readings[nics[0]["ibdev"]]
    assert not [name for name in off[1] if "prio3_pause" in name]
    assert "rx_prio3_pause" in readings[nics[1]["ibdev"]][1]
    # no PFC on the host: nothing holds the switch back, the host drops and the senders retransmit
    assert failed(nics[0]["ibdev"], off) == ["fabric.host_pfc", "fabric.retransmits", "fabric.rx_discards"]


def test_host_ecn_off_sends_no_cnps(fleet: Fleet) -> None:
    with state.locked(fleet.node) as node:
        nic = node["nics"][0]
        sysfs_rdma.write_ecn(fleet.node / "sys", nic, [0] * 8, [0] * 8)
    pair = fleet.window()[nic["ibdev"]]
    moved = grew(pair, (*ECN, "rp_cnp_ignored"))
    assert moved["np_ecn_marked_roce_packets"] > 0 and moved["rp_cnp_ignored"] > 0
    assert moved["np_cnp_sent"] == moved["rp_cnp_handled"] == 0


def test_link_down_moves_nothing(fleet: Fleet) -> None:
    with state.locked(fleet.node) as node:
        node["nics"][0]["link_up"] = False
    nic = fleet.nics()[0]
    before, after = fleet.window()[nic["ibdev"]]
    assert before == after


def test_without_leaf_files_the_path_is_healthy(fleet: Fleet) -> None:
    for path in (fleet.root / "leaves").glob("*.json"):
        path.unlink()
    readings = fleet.window()
    assert all(failed(ibdev, pair) == [] for ibdev, pair in readings.items())


def test_switch_ecn_judged_on_the_class_dscp_26_reaches() -> None:
    qos = nvue_state.default_qos()
    assert roce_traffic.switch_priority(qos) == 3 and roce_traffic.switch_ecn(qos, 3)
    assert roce_traffic.switch_pfc(qos)
    qos["egress-queue-mapping"]["default-global"]["switch-priority"]["3"]["traffic-class"] = 5
    assert not roce_traffic.switch_ecn(qos, 3)  # tc 5 has no ECN
    qos["pfc"]["default-global"]["rx"] = "disable"
    assert not roce_traffic.switch_pfc(qos)
    assert roce_traffic.switch_priority({}) == 3  # Cumulus's default map: DSCP 26 -> 26 // 8
    assert roce_traffic.switch_mtu({}, "swp1") == 9216


# -------------------------------------------------------------- the tool and sysfs


def run_ethtool(node: Path, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = ethtool.main(list(argv), node)
    return rc, out.getvalue(), err.getvalue()


def test_ethtool_s_prints_mlx5s_format_and_writes_the_same_reading_to_sysfs(fleet: Fleet) -> None:
    nic = fleet.nics()[2]
    hw = sysfs_rdma.hw_counters_dir(fleet.node / "sys", nic)
    # from the build on, every hw counter file is there, at zero
    assert sorted(p.name for p in hw.iterdir()) == sorted(sysfs_rdma.HW_COUNTERS)
    assert {p.read_text(encoding="utf-8") for p in hw.iterdir()} == {"0\n"}
    start = time.time() - WINDOW
    fleet.load(4, start)
    with state.locked(fleet.node) as node:  # a reading ten seconds ago, so that this one has moved
        roce_traffic.advance(fleet.node, node, node["nics"][2], start)
    rc, out, err = run_ethtool(fleet.node, "-S", nic["netdev"])
    assert (rc, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == "NIC statistics:"
    assert all(line.startswith("     ") and ": " in line for line in lines[1:])
    stats = roce_counters.parse_ethtool_stats(out)
    assert list(stats)[:4] == ["rx_packets", "rx_bytes", "tx_packets", "tx_bytes"]
    assert stats["rx_bytes_phy"] > 0 and stats["rx_prio3_pause"] > 0
    assert "rx_global_pause" not in stats  # global pause is off on the tuned node
    assert [n for n in stats if "_pause" in n and n.startswith(("rx_prio", "tx_prio"))] == [
        "rx_prio3_pause",
        "rx_prio3_pause_duration",
        "tx_prio3_pause",
        "tx_prio3_pause_duration",
        "rx_prio3_pause_transition",
    ]
    values = state.load(fleet.node)["nics"][2]["roce_counters"]["values"]
    on_disk = {p.name: int(p.read_text(encoding="utf-8")) for p in hw.iterdir()}
    assert on_disk == {n: int(values.get(n, 0)) for n in sysfs_rdma.HW_COUNTERS}
    assert on_disk["np_cnp_sent"] > 0
    assert stats["rx_bytes_phy"] == int(values["rx_bytes_phy"])


def test_ethtool_s_with_global_pause_prints_its_counters(fleet: Fleet) -> None:
    nic = fleet.nics()[0]
    assert run_ethtool(fleet.node, "-A", nic["netdev"], "rx", "on")[0] == 0
    rc, out, _ = run_ethtool(fleet.node, "--statistics", nic["netdev"])
    assert rc == 0 and "     rx_global_pause: 0\n" in out


@pytest.mark.parametrize(
    ("argv", "rc", "message"),
    [
        (["-S", "eth9"], 96, "Cannot get stats strings information: No such device"),
        (["-S", "ens21np0", "extra"], 1, "bad command line argument"),
    ],
)
def test_ethtool_s_errors(fleet: Fleet, argv: list[str], rc: int, message: str) -> None:
    got, out, err = run_ethtool(fleet.node, *argv)
    assert (got, out) == (rc, "") and message in err
