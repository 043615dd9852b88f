"""plugins/module_utils/rdma/roce_reading.py: a node's RoCE ports and their counters read (exact argv, the C
locale, ethtool -S before the sysfs hw_counters), failures that name the tool, and the judgement of
two readings, on the simulator's node and leaves (tests/unit/modules/rocenode.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.nccl import nccl_bandwidth
from ansible_collections.gpufleet.node.plugins.module_utils.node import watch
from ansible_collections.gpufleet.node.plugins.module_utils.rdma import rdma_read, roce_counters, roce_reading
from gpufleet_sim import faults_health, sysfs_rdma
from gpufleet_sim import state as sim_state

from tests.unit.modules import rocenode
from tests.unit.modules.rocenode import ETHTOOL, RoceNode

ENV = {"environ_update": {"LC_ALL": "C"}}
IBDEVS = [f"mlx5_{i}" for i in range(8)]


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RoceNode:
    return rocenode.install(tmp_path, monkeypatch)


def test_roce_ports_are_the_ethernet_rdma_ports_with_their_netdevs(node: RoceNode) -> None:
    ports = roce_reading.roce_ports()
    assert ports == node.ports()
    assert [p["ibdev"] for p in ports] == IBDEVS and ports[0] == {
        "ibdev": "mlx5_0",
        "port": 1,
        "netdev": "ens21np0",
    }


def test_an_infiniband_port_is_no_roce_port(node: RoceNode) -> None:
    nic = node.nics()[1]
    link_layer = (
        Path(node.root) / "sys" / "class" / "infiniband" / nic["ibdev"] / "ports" / "1" / "link_layer"
    )
    link_layer.write_text("InfiniBand\n", encoding="utf-8")
    assert nic["ibdev"] not in [p["ibdev"] for p in roce_reading.roce_ports()]


def test_no_rdma_device_no_port(tmp_path: Path) -> None:
    assert roce_reading.roce_ports(str(tmp_path)) == []


def test_read_port_runs_ethtool_then_reads_hw_counters(node: RoceNode) -> None:
    node.load(4)
    roce_reading.read_port(node.run_command, "mlx5_0", "ens21np0", 1, ETHTOOL)
    node.sleep(10)
    reading = roce_reading.read_port(node.run_command, "mlx5_0", "ens21np0", 1, ETHTOOL)
    assert node.calls == [([ETHTOOL, "-S", "ens21np0"], ENV)] * 2
    # both sets in one dict: ethtool's port counters and the RDMA device's hw_counters
    assert set(sysfs_rdma.HW_COUNTERS) < set(reading)
    assert reading["rx_packets_phy"] > 0 and reading["np_cnp_sent"] > 0
    # one reading: the hw_counters files are what this ethtool -S call left (the sim moves both at once)
    values = next(n for n in node.nics() if n["ibdev"] == "mlx5_0")["roce_counters"]["values"]
    assert reading["np_cnp_sent"] == int(values["np_cnp_sent"])
    assert reading["rx_packets_phy"] == int(values["rx_packets_phy"])


def test_read_ports_reads_each_port_once(node: RoceNode) -> None:
    readings = roce_reading.read_ports(node.run_command, node.ports(), ETHTOOL)
    assert list(readings) == IBDEVS
    assert [args for args, _ in node.calls] == [[ETHTOOL, "-S", p["netdev"]] for p in node.ports()]


def test_read_hw_counters_without_the_directory_is_empty(node: RoceNode) -> None:
    assert roce_reading.read_hw_counters("mlx5_9", 1) == {}


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (
            (96, "", "Cannot get stats strings information: No such device\n"),
            "ethtool -S ens21np0 failed (rc=96): Cannot get stats strings information: No such device",
        ),
        (
            (0, "NIC statistics:\n     rx_packets: twelve\n", ""),
            "could not read the output of ethtool -S ens21np0: "
            "ethtool -S: line 'rx_packets: twelve' is not '<counter>: <unsigned integer>'",
        ),
        (
            (0, "NIC statistics:\n", ""),
            "could not read the output of ethtool -S ens21np0: ethtool -S: no counters after "
            "'NIC statistics:' (the driver exports none?)",
        ),
        ((0, "", ""), "could not read the output of ethtool -S ens21np0: ethtool -S: empty output"),
    ],
)
def test_ethtool_failures_name_the_tool(node: RoceNode, answer: tuple[int, str, str], message: str) -> None:
    node.answers[(ETHTOOL, "-S", "ens21np0")] = answer
    with pytest.raises(roce_reading.ReadError) as caught:
        roce_reading.read_port(node.run_command, "mlx5_0", "ens21np0", 1, ETHTOOL)
    assert str(caught.value) == message
    assert caught.value.details() == {
        "cmd": [ETHTOOL, "-S", "ens21np0"],
        "rc": answer[0],
        "stdout": answer[1],
        "stderr": answer[2],
    }
    if answer == (0, "", ""):  # an empty read is tried again (tool_runner.EMPTY_RETRIES) first
        assert len(node.calls) == 3


def test_a_hw_counter_that_is_no_number_names_the_file(node: RoceNode) -> None:
    nic = node.nics()[0]
    # an optional counter (rdma statistic set ... optional-counters) the simulated ethtool does not write
    path = sysfs_rdma.hw_counters_dir(Path(node.root) / "sys", nic) / "cc_rx_ce_pkts"
    path.write_text("n/a\n", encoding="utf-8")
    with pytest.raises(
        roce_reading.ReadError, match=r"^sysfs: .*/hw_counters/cc_rx_ce_pkts holds 'n/a', not a counter"
    ):
        roce_reading.read_port(node.run_command, nic["ibdev"], nic["netdev"], 1, ETHTOOL)


# ------------------------------------------------------------------ the judgement


def window(node: RoceNode, seconds: float = 10.0, **kwargs: Any) -> roce_reading.Window:
    """A Window over every port with ``seconds`` of the burn-in's load between its two readings."""
    watch = roce_reading.Window(node.run_command, node.ports(), ETHTOOL, clock=node.clock, **kwargs)
    watch.start()
    node.load(4)
    node.sleep(seconds)
    watch.stop()
    return watch


def by_name(checks: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in checks}


def test_healthy_fabric_under_load_passes(node: RoceNode) -> None:
    watch = window(node)
    checks = watch.checks()
    assert checks and all(c["ok"] for c in checks)
    assert {c["name"].split("[")[0] for c in checks} == {
        "fabric.retransmits",
        "fabric.qp_failures",
        "fabric.pause_duration",
        "fabric.pause_storm",
        "fabric.rx_discards",
        "fabric.rx_out_of_buffer",
        "fabric.ecn_loop",
        "fabric.host_pfc",
        "rdma_link.link_state",
        "fabric.link_rate",
        "fabric.link_flaps",
        "fabric.traffic",
        "fabric.symbol_errors",
        "fabric.link_integrity",
        "fabric.buffer_overrun",
    }
    assert len(checks) == 15 * len(IBDEVS)
    summary = watch.summary()
    assert summary["window_s"] == 10.0 and summary["error"] is None
    assert (
        summary["deltas"]["mlx5_0"]["np_cnp_sent"] > 0 and summary["deltas"]["mlx5_0"]["out_of_sequence"] == 0
    )


def test_switch_pfc_off_fails_retransmits_on_that_leafs_ports(node: RoceNode) -> None:
    """A switch-PFC-off reading: leaf01 drops the RoCE priority's traffic under load."""
    node.leaf("leaf01", rocenode.switch_pfc_off)
    checks = by_name(window(node).checks())
    for ibdev in node.on_leaf("leaf01"):
        retransmits = checks[f"fabric.retransmits[{ibdev}]"]
        assert retransmits["ok"] is False and retransmits["value"] > 100 and retransmits["limit"] == 1.0
        assert "lost packets and retransmits" in retransmits["message"]
        assert checks[f"fabric.rx_discards[{ibdev}]"]["ok"] is False
        assert checks[f"fabric.ecn_loop[{ibdev}]"]["ok"] is True  # the leaf still marks
    for ibdev in node.on_leaf("leaf02"):
        assert checks[f"fabric.retransmits[{ibdev}]"]["ok"] is True


def test_thresholds_reach_the_judge(node: RoceNode) -> None:
    node.leaf("leaf01", rocenode.switch_pfc_off)
    checks = window(node, thresholds={"retransmits_per_s": 1e9, "rx_discards_per_s": 1e9}).checks()
    assert all(c["ok"] for c in checks)


def test_a_failed_read_is_one_failed_check_naming_the_tool(node: RoceNode) -> None:
    node.answers[(ETHTOOL, "-S", "ens38np0")] = (0, "garbage\n", "")
    watch = window(node)
    assert watch.checks() == [
        {
            "name": "burn_in.roce_counters",
            "ok": False,
            "value": watch.error,
            "limit": None,
            "unit": "",
            "message": "the RoCE ports' counters could not be read: " + str(watch.error),
        }
    ]
    assert str(watch.error).startswith(
        "could not read the output of ethtool -S ens38np0: ethtool -S: line 'garbage'"
    )
    assert watch.summary()["deltas"] == {}


def test_judge_matches_judge_port() -> None:
    before = {"mlx5_0": {"out_of_sequence": 0}, "mlx5_1": {"out_of_sequence": 5}}
    after = {
        "mlx5_0": {"out_of_sequence": 50},
        "mlx5_1": {"out_of_sequence": 5},
        "mlx5_2": {"out_of_sequence": 1},
    }
    checks = roce_reading.judge(before, after, 10.0)
    assert checks == [
        *roce_counters.judge_port("mlx5_0", before["mlx5_0"], after["mlx5_0"], 10.0),
        *roce_counters.judge_port("mlx5_1", before["mlx5_1"], after["mlx5_1"], 10.0),
    ]
    assert [c["ok"] for c in checks] == [False, True]
    assert roce_reading.deltas(before, after) == {
        "mlx5_0": {"out_of_sequence": 50},
        "mlx5_1": {"out_of_sequence": 0},
        "mlx5_2": {},
    }


@pytest.mark.parametrize(
    ("thresholds", "errors"),
    [
        (None, []),
        ({"pause_pct": 5, "retransmits_per_s": 0.5}, []),
        (
            {"pause_percent": 5},
            [
                "pause_percent is not a threshold (known: buffer_overrun_errors, link_flap_settle_s, "
                "link_flaps, link_integrity_errors, min_traffic_share, pause_pct, pause_storm_events, "
                "qp_failures, retransmits_per_s, rx_discards_per_s, rx_out_of_buffer_per_s, "
                "symbol_errors_per_min, unanswered_ecn_marks_per_s)"
            ],
        ),
        ({"pause_pct": -1}, ["pause_pct must be 0 or more, not -1"]),
        ({"pause_pct": "ten"}, ["pause_pct must be a number, not 'ten'"]),
        ({"qp_failures": True}, ["qp_failures must be a number, not True"]),
    ],
)
def test_threshold_errors(thresholds: dict[str, Any] | None, errors: list[str]) -> None:
    assert roce_reading.threshold_errors(roce_reading.thresholds_from(thresholds)) == errors


# ------------------------------------------------------------------ the link over the window

PEERS = {"mlx5_7": "leaf02:swp2"}


def loaded_window(node: RoceNode, during: Callable[[], None], **kwargs: Any) -> roce_reading.Window:
    """A burn-in's window: 8 s of load, ``during()``, 12 s more (what the gate saw on node02)."""
    watch = roce_reading.Window(
        node.run_command, node.ports(), ETHTOOL, clock=node.clock, peers=PEERS, **kwargs
    )
    node.load(4)
    watch.start()
    node.sleep(8)
    during()
    node.sleep(12)
    watch.stop()
    return watch


def test_a_link_that_dies_under_load_fails_naming_port_leaf_port_and_what_changed(node: RoceNode) -> None:
    checks = by_name(loaded_window(node, lambda: node.link("mlx5_7", up=False)).checks())
    state = checks["rdma_link.link_state[mlx5_7]"]
    assert state["ok"] is False and state["value"] == "DOWN" and state["limit"] == "ACTIVE"
    assert state["message"].startswith(
        "mlx5_7 (cabled to leaf02:swp2) went down during the burn-in: ACTIVE / LinkUp at 400 Gb/s when it "
        "started, DOWN / Disabled when it ended"
    ), state["message"]
    flaps = checks["fabric.link_flaps[mlx5_7]"]
    assert flaps["ok"] is False and flaps["value"] == 1 and flaps["limit"] == 0
    # its siblings are untouched: up, at their rate, no flap
    for ibdev in IBDEVS[:-1]:
        assert checks[f"rdma_link.link_state[{ibdev}]"]["ok"] is True
        assert checks[f"fabric.link_flaps[{ibdev}]"]["ok"] is True
        assert checks[f"fabric.link_rate[{ibdev}]"]["ok"] is True


def test_a_link_down_for_the_whole_load_carried_nothing_while_its_siblings_did(node: RoceNode) -> None:
    node.link("mlx5_7", up=False)
    checks = by_name(loaded_window(node, lambda: None).checks())
    traffic = checks["fabric.traffic[mlx5_7]"]
    assert traffic["ok"] is False and traffic["value"] == 0 and traffic["limit"] == 0.1
    assert "the load did not reach it" in traffic["message"] and "leaf02:swp2" in traffic["message"]
    # zero traffic gave zero retransmits: those counter checks pass, which is why traffic is judged
    assert checks["fabric.retransmits[mlx5_7]"]["ok"] is True
    assert checks["rdma_link.link_state[mlx5_7]"]["ok"] is False
    assert "down for the whole window" in checks["rdma_link.link_state[mlx5_7]"]["message"]
    assert all(checks[f"fabric.traffic[{ibdev}]"]["ok"] for ibdev in IBDEVS[:-1])


def test_a_flap_that_came_back_still_fails(node: RoceNode) -> None:
    def flap() -> None:
        node.link("mlx5_3", up=False)
        node.sleep(1)
        node.link("mlx5_3", up=True)

    checks = by_name(loaded_window(node, flap).checks())
    assert checks["rdma_link.link_state[mlx5_3]"]["ok"] is True
    flaps = checks["fabric.link_flaps[mlx5_3]"]
    assert flaps["ok"] is False and flaps["value"] == 1
    assert "carrier_down_count" in flaps["message"] and "reseat or replace" in flaps["message"]


def test_a_link_that_retrained_slower_fails_its_rate(node: RoceNode) -> None:
    checks = by_name(loaded_window(node, lambda: node.rate("mlx5_2", 200)).checks())
    rate = checks["fabric.link_rate[mlx5_2]"]
    assert rate["ok"] is False and rate["value"] == 200 and rate["limit"] == 400
    held = checks["fabric.link_rate[mlx5_1]"]
    assert held["ok"] is True and held["value"] == held["limit"] == 400


def test_an_idle_node_is_no_fault(node: RoceNode) -> None:
    """No load: no traffic to compare, no congestion for the ECN loop to signal."""
    watch = roce_reading.Window(node.run_command, node.ports(), ETHTOOL, clock=node.clock)
    watch.start()
    node.sleep(10)
    watch.stop()
    checks = watch.checks()
    assert checks and all(c["ok"] for c in checks), [c for c in checks if not c["ok"]]
    assert not any(c["name"].startswith("fabric.traffic[") for c in checks)


def test_a_few_microseconds_of_pause_after_the_load_is_no_silent_ecn_loop() -> None:
    before = {
        "np_ecn_marked_roce_packets": 100,
        "np_cnp_sent": 90,
        "rp_cnp_handled": 90,
        "rx_prio3_pause_duration": 0,
    }
    after = {**before, "rx_prio3_pause_duration": 5}
    ecn = by_name(roce_counters.judge_port("mlx5_0", before, after, 10.0))["fabric.ecn_loop[mlx5_0]"]
    assert ecn["ok"] is True and ecn["limit"] == 0 and "no congestion to signal" in ecn["message"]
    # a tenth of the window paused with no mark at all is the silent loop
    after = {**before, "rx_prio3_pause_duration": 1_000_000}
    ecn = by_name(roce_counters.judge_port("mlx5_0", before, after, 10.0))["fabric.ecn_loop[mlx5_0]"]
    assert ecn["ok"] is False and "the switch is not marking" in ecn["message"]


def test_marks_without_cnps_are_a_broken_loop(node: RoceNode) -> None:
    """Host ECN notification point off: the leaf marks, the host never answers with a CNP."""
    for nic in node.nics():
        sysfs_rdma.write_ecn(Path(node.root) / "sys", nic, [0] * 8, [0] * 8)
    checks = by_name(window(node).checks())
    for ibdev in IBDEVS:
        ecn = checks[f"fabric.ecn_loop[{ibdev}]"]
        assert ecn["ok"] is False and ecn["value"] == 0, ecn
        assert "sent no CNP" in ecn["message"] and "notification point is off" in ecn["message"]


def test_the_summary_keeps_each_links_start_and_end(node: RoceNode) -> None:
    summary = loaded_window(node, lambda: node.link("mlx5_7", up=False)).summary()
    assert summary["links"]["mlx5_7"] == {
        "start": {"state": "ACTIVE", "phys_state": "LinkUp", "rate_gbps": 400},
        "end": {"state": "DOWN", "phys_state": "Disabled", "rate_gbps": 40},
    }
    assert summary["deltas"]["mlx5_7"]["link_down_events_phy"] == 1
    assert summary["deltas"]["mlx5_7"]["carrier_down_count"] == 1


def test_the_watch_reading_carries_each_ports_link(node: RoceNode) -> None:
    ports = {
        p["ibdev"]: p for p in watch.port_facts(loaded_window(node, lambda: node.link("mlx5_7", up=False)))
    }
    assert (
        ports["mlx5_7"]["link_up"],
        ports["mlx5_7"]["rate_gbps"],
        ports["mlx5_7"]["link_down_events"],
    ) == (
        0,
        None,
        1,
    )
    assert (
        ports["mlx5_0"]["link_up"],
        ports["mlx5_0"]["rate_gbps"],
        ports["mlx5_0"]["link_down_events"],
    ) == (
        1,
        400,
        0,
    )


# ------------------------------------------------------------------ a module's window from its options

OPTIONS = {
    "roce_ports": True,
    "roce_priority": 3,
    "roce_thresholds": {},
    "roce_cabling": {"mlx5_4": "leaf02:swp1"},
}


def test_window_for_builds_the_window_a_modules_options_ask_for(node: RoceNode) -> None:
    built = roce_reading.window_for(
        node.run_command,
        OPTIONS,
        lambda: ETHTOOL,
        name="health.nccl_roce_counters",
        during="during the all-reduce",
    )
    assert built is not None and built.ports == node.ports() and built.peers == {"mlx5_4": "leaf02:swp1"}
    assert (built.name, built.during, built.priority) == (
        "health.nccl_roce_counters",
        "during the all-reduce",
        3,
    )
    assert (
        roce_reading.window_for(node.run_command, {**OPTIONS, "roce_ports": False}, lambda: ETHTOOL, "n", "d")
        is None
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"roce_priority": 9}, r"roce_priority is 9; the RoCE priority is 0\.\.7"),
        ({"roce_thresholds": {"pause_pct": -1}}, r"roce_thresholds: pause_pct"),
    ],
)
def test_window_for_refuses_options_out_of_range(
    node: RoceNode, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(roce_reading.OptionError, match=message):
        roce_reading.window_for(node.run_command, {**OPTIONS, **options}, lambda: ETHTOOL, "n", "d")


def test_a_node_without_roce_ports_has_no_window(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rdma_read, "SYSFS_ROOT", str(tmp_path))
    assert roce_reading.window_for(lambda *a, **k: (0, "", ""), OPTIONS, lambda: ETHTOOL, "n", "d") is None


def test_a_leaf_that_does_not_mark_ecn_fails_the_ecn_loop_of_its_ports_under_load(node: RoceNode) -> None:
    """What the all-reduce's window sees with switch-ecn-off on leaf02: the senders paused, no mark."""
    node.leaf("leaf02", rocenode.switch_ecn_off)
    checks = by_name(window(node, during="during the all-reduce").checks())
    for ibdev in node.on_leaf("leaf02"):
        loop = checks[f"fabric.ecn_loop[{ibdev}]"]
        assert loop["ok"] is False and loop["value"] == 0, loop
    assert all(checks[f"fabric.ecn_loop[{ibdev}]"]["ok"] for ibdev in node.on_leaf("leaf01"))


def test_a_low_all_reduce_names_the_roce_checks_that_failed_during_it(node: RoceNode) -> None:
    """nccl_bandwidth.judge with the window's checks: the low figure and its cause in one message."""
    node.leaf("leaf02", rocenode.switch_ecn_off)
    fabric = window(node, during="during the all-reduce").checks()
    run = {"avg_busbw_gbps": 110.5, "devices": list(range(16)), "rows": [{"size_bytes": 1 << 30}]}
    low = by_name(nccl_bandwidth.judge(run, 16, 150.0, fabric))["health.nccl_busbw"]
    assert (low["ok"], low["value"], low["limit"]) == (False, 110.5, 150.0)
    assert f"fabric.ecn_loop[{', '.join(node.on_leaf('leaf02'))}]" in low["message"], low["message"]
    assert "gpufleet switch --check" in low["message"] and "health.nvlink" not in low["message"]
    # a healthy window: the list of where to look, as without one
    healthy = window(node).checks()
    generic = by_name(nccl_bandwidth.judge(run, 16, 150.0, [c for c in healthy if c["ok"]]))[
        "health.nccl_busbw"
    ]
    assert "health.nvlink" in generic["message"]


def test_a_low_all_reduce_names_the_leaf_switch_and_port_of_each_port(node: RoceNode) -> None:
    """With the cabling plan (each port's leaf:swp, what the fabric checks held LLDP to): every port the
    message names carries its leaf switch and port, and the switch check it suggests is that leaf's."""
    cabling = {n["ibdev"]: f"{n['neighbor']['chassis']}:{n['neighbor']['port']}" for n in node.nics()}
    node.leaf("leaf02", rocenode.switch_ecn_off)
    fabric = window(node, during="during the all-reduce", peers=cabling).checks()
    run = {"avg_busbw_gbps": 110.5, "devices": list(range(16)), "rows": [{"size_bytes": 1 << 30}]}
    low = by_name(nccl_bandwidth.judge(run, 16, 150.0, fabric, cabling))["health.nccl_busbw"]
    named = ", ".join(f"{ibdev} ({cabling[ibdev]})" for ibdev in node.on_leaf("leaf02"))
    assert f"fabric.ecn_loop[{named}]" in low["message"], low["message"]
    assert all(cabling[ibdev].startswith("leaf02:swp") for ibdev in node.on_leaf("leaf02"))
    assert "`gpufleet switch --check --limit leaf02`" in low["message"], low["message"]
    # nothing failed during the run: where to look, with every port's leaf port and both leaves
    healthy = [c for c in window(node, peers=cabling).checks() if c["ok"]]
    generic = by_name(nccl_bandwidth.judge(run, 16, 150.0, healthy, cabling))["health.nccl_busbw"]
    assert all(f"{ibdev} ({leaf_port})" in generic["message"] for ibdev, leaf_port in cabling.items())
    assert "`gpufleet switch --check --limit leaf01,leaf02`" in generic["message"], generic["message"]
    # a port the plan does not name: the port alone, and no leaf is guessed for it
    partial = {ibdev: port for ibdev, port in cabling.items() if ibdev not in node.on_leaf("leaf02")}
    unplanned = by_name(nccl_bandwidth.judge(run, 16, 150.0, fabric, partial))["health.nccl_busbw"]
    assert f"fabric.ecn_loop[{', '.join(node.on_leaf('leaf02'))}]" in unplanned["message"]
    assert "`gpufleet switch --check` for" in unplanned["message"], unplanned["message"]


def test_a_mark_or_two_not_answered_yet_is_no_dead_notification_point() -> None:
    """A live NP coalesces CNPs and its counters are read apart: one mark in a 5 s watch window with no
    CNP yet passes, saying so; hundreds a second with none is the dead notification point."""
    before = {"np_ecn_marked_roce_packets": 100, "np_cnp_sent": 90, "rp_cnp_handled": 90}
    after = {**before, "np_ecn_marked_roce_packets": 101}
    ecn = by_name(roce_counters.judge_port("mlx5_1", before, after, 5.0))["fabric.ecn_loop[mlx5_1]"]
    assert ecn["ok"] is True and "1 marks not answered yet, 0.2/s, within the 5/s" in ecn["message"]
    # at the limit it still passes; above it, the loop is broken
    after = {**before, "np_ecn_marked_roce_packets": 125}
    assert by_name(roce_counters.judge_port("mlx5_1", before, after, 5.0))["fabric.ecn_loop[mlx5_1]"]["ok"]
    after = {**before, "np_ecn_marked_roce_packets": 100 + 347 * 5}
    ecn = by_name(roce_counters.judge_port("mlx5_1", before, after, 5.0))["fabric.ecn_loop[mlx5_1]"]
    assert ecn["ok"] is False and "1735 ECN-marked packets arrived (347/s)" in ecn["message"]
    # the limit is the profile's to set
    strict = {"unanswered_ecn_marks_per_s": 0.0}
    after = {**before, "np_ecn_marked_roce_packets": 101}
    checks = by_name(roce_counters.judge_port("mlx5_1", before, after, 5.0, thresholds=strict))
    assert checks["fabric.ecn_loop[mlx5_1]"]["ok"] is False


def test_read_port_reads_the_phy_port_counters_from_sysfs(node: RoceNode) -> None:
    reading = roce_reading.read_port(node.run_command, "mlx5_0", "ens21np0", 1, ETHTOOL)
    assert {n: reading[n] for n in roce_counters.PORT_COUNTERS} == dict.fromkeys(
        roce_counters.PORT_COUNTERS, 0
    )
    counters = Path(node.root) / "sys" / "class" / "infiniband" / "mlx5_0" / "ports" / "1" / "counters"
    (counters / "symbol_error").write_text("x\n", encoding="utf-8")
    with pytest.raises(roce_reading.ReadError, match=r"counters/symbol_error holds 'x', not a counter"):
        roce_reading.read_port_counters("mlx5_0", 1)
    for name in roce_counters.PORT_COUNTERS:
        (counters / name).unlink()
    assert roce_reading.read_port_counters("mlx5_0", 1) == {}  # a driver without them: nothing judged


def test_a_port_whose_symbol_errors_rise_fails_the_window_naming_it(node: RoceNode) -> None:
    nic = node.nics()[0]
    with sim_state.locked(node.dir) as st:
        faults_health.nic_symbol_errors(st, node.dir / "sys")
    read = window(node, seconds=120.0, during="during the burn-in", peers={nic["ibdev"]: "leaf01:swp1"})
    checks = by_name(read.checks())
    symbols = checks[f"fabric.symbol_errors[{nic['ibdev']}]"]
    assert (symbols["ok"], symbols["value"], symbols["limit"]) == (False, 600, 4)
    assert "(cabled to leaf01:swp1): 600 symbol errors during the burn-in" in symbols["message"]
    assert [c["name"] for c in checks.values() if not c["ok"]] == [symbols["name"]]
    assert read.summary()["deltas"][nic["ibdev"]]["symbol_error"] == 600
    # the watch's fact of the same window (what gpufleet_rdma_symbol_errors_per_minute shows)
    facts = {p["ibdev"]: p for p in watch.port_facts(read)}
    assert facts[nic["ibdev"]]["symbol_errors_per_minute"] == 300.0
    assert facts[nic["ibdev"]]["phy_errors"] == {"link_integrity": 0, "buffer_overrun": 0}
    assert facts["mlx5_1"]["symbol_errors_per_minute"] == 0.0
