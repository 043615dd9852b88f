"""plugins/module_utils/rdma/roce_counters.py: ethtool -S and rdma statistic on the real captures
(tests/fixtures/real/ethtool, rdma-statistic; INDEX.md §9), and the judgement of a RoCE port's
counters over a window, table-driven over the fabric's failure modes (issue 12 §3).

The judgement's readings start from the real captures (a ConnectX-4 Lx's ethtool -S, an mlx5
port's hw counters) and grow the counters each failure mode moves.
"""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.rdma import roce_counters

from tests.unit.mutations import FIXTURES

ETHTOOL = FIXTURES / "ethtool" / "ethq-mlx5-connectx4lx-ethtool-S-no-pfc.txt"
RDMA = FIXTURES / "rdma-statistic" / "lkml-2021-mlx5-rdma-statistic-show-link.txt"
SHOW_LINK_PROMPT = "$ rdma statistic show link rocep8s0f0/1\n"


def _ethtool_text() -> str:
    return ETHTOOL.read_text(encoding="utf-8")


def show_link_output(capture: str) -> str:
    """The output of `rdma statistic show link` in the mail capture: what follows its prompt."""
    return capture.split(SHOW_LINK_PROMPT, 1)[-1]


def _rdma_text() -> str:
    return show_link_output(RDMA.read_text(encoding="utf-8"))


def test_every_capture_is_asserted() -> None:
    assert [p.name for p in ETHTOOL.parent.iterdir()] == [ETHTOOL.name]
    assert [p.name for p in RDMA.parent.iterdir()] == [RDMA.name]


# ------------------------------------------------------------------ ethtool -S


def test_ethtool_capture_connectx4_lx_without_pfc() -> None:
    stats = roce_counters.parse_ethtool_stats(_ethtool_text())
    assert len(stats) == 751
    assert list(stats)[:2] == ["rx_packets", "rx_bytes"]
    assert (stats["rx_packets"], stats["tx_bytes"]) == (845320277, 2655285206479)
    assert stats["tx_pci_signal_integrity"] == 34
    assert stats["tx15_xmit_more"] == 5530  # the last line
    assert (stats["rx_discards_phy"], stats["rx_out_of_buffer"], stats["rx_global_pause"]) == (0, 0, 0)
    assert stats["rx_prio0_bytes"] == 2202570777997
    # PFC off: per-priority bytes and packets, but no per-priority pause counters at all
    assert "rx_prio3_packets" in stats
    assert not [name for name in stats if re_pause(name)]


def re_pause(name: str) -> bool:
    return name.startswith(("rx_prio", "tx_prio")) and "_pause" in name


def test_ethtool_with_its_header_and_indent_reads_the_same() -> None:
    text = _ethtool_text()
    printed = "NIC statistics:\n" + "".join(f"     {line}\n" for line in text.splitlines())
    assert roce_counters.parse_ethtool_stats(printed) == roce_counters.parse_ethtool_stats(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty output"),
        ("NIC statistics:\n", "no counters"),
        ("no stats available\n", "not '<counter>: <unsigned integer>'"),
        ("rx_packets: 12\nrx_bytes: 34", "does not end with a newline"),
        ("rx_packets: -12\n", "not '<counter>"),
        ("rx_packets: 1e3\n", "not '<counter>"),
        ("rx_packets: \u0661\u0662\n", "a digit that is not 0-9"),
        ("rx_packets: 12\nrx_packets: 13\n", "printed twice"),
        ("rx_packets: 18446744073709551616\n", "out of range"),
        ("rx_packets: 1\nNIC statistics:\n", "not '<counter>"),
    ],
)
def test_ethtool_malformed_is_a_parse_error_naming_the_tool(text: str, message: str) -> None:
    with pytest.raises(roce_counters.ParseError, match=r"^ethtool -S: .*" + message.replace("(", r"\(")):
        roce_counters.parse_ethtool_stats(text)


# ------------------------------------------------------------------ rdma statistic show link


def test_rdma_statistic_capture_with_optional_counters() -> None:
    links = roce_counters.parse_rdma_statistic(_rdma_text())
    assert list(links) == [("rocep8s0f0", 1)]
    counters = links[("rocep8s0f0", 1)]
    assert len(counters) == 30
    assert list(counters)[:2] == ["rx_write_requests", "rx_read_requests"]
    assert list(counters)[-2:] == ["cc_rx_ce_pkts", "cc_rx_cnp_pkts"]  # the optional ones, set
    for name in (*roce_counters.RETRANSMIT_COUNTERS, *roce_counters.ECN_LOOP_COUNTERS, "rnr_nak_retry_err"):
        assert counters[name] == 0
    assert "req_transport_retries_exceeded" not in counters  # not in that 2021 kernel


def test_rdma_statistic_one_line_per_link_as_the_tool_prints() -> None:
    text = (
        "link mlx5_0/1 out_of_sequence 17 np_cnp_sent 3\n"
        "link mlx5_1/1 out_of_sequence 0 np_cnp_sent 18446744073709551615\n"
    )
    assert roce_counters.parse_rdma_statistic(text) == {
        ("mlx5_0", 1): {"out_of_sequence": 17, "np_cnp_sent": 3},
        ("mlx5_1", 1): {"out_of_sequence": 0, "np_cnp_sent": 2**64 - 1},
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty output"),
        ("link rocep8s0f0/1 supported optional-counters cc_rx_ce_pkts,cc_rx_cnp_pkts\n", "without a value"),
        ("link rocep8s0f0/1 optional-counters cc_rx_ce_pkts,cc_rx_cnp_pkts\n", "not '<counter>"),
        ("out_of_sequence 0\n", "before any 'link"),
        ("link rocep8s0f0 out_of_sequence 0\n", "is not 'link <dev>/<port>"),
        ("link rocep8s0f0/1 out_of_sequence\n", "without a value"),
        ("link rocep8s0f0/1\n", "has no counters"),
        ("link rocep8s0f0/1 out_of_sequence 0\nlink rocep8s0f0/1 out_of_sequence 1\n", "printed twice"),
        ("link rocep8s0f0/1 out_of_sequence 0 out_of_sequence 1\n", "prints out_of_sequence twice"),
        ("link rocep8s0f0/1 out_of_sequence -1\n", "not '<counter>"),
        ("link rocep8s0f0/1 out_of_sequence 12", "does not end with a newline"),
        ("link rocep8s0f0/1 out_of_sequence %s\n" % ("9" * 400), "out of range"),
    ],
)
def test_rdma_statistic_malformed_is_a_parse_error_naming_the_tool(text: str, message: str) -> None:
    with pytest.raises(roce_counters.ParseError, match=r"^rdma statistic: .*" + message):
        roce_counters.parse_rdma_statistic(text)


# ------------------------------------------------------------------ the judgement


def _base(pfc_priority: int | None = 3) -> dict[str, int]:
    """One port's counters as a node reads them: the real hw counters and ethtool -S, plus the
    per-priority pause counters mlx5 adds once PFC is on (pfc_priority) and the RoCE v2 QP
    failure and pause-storm counters newer firmware has."""
    reading = dict(roce_counters.parse_rdma_statistic(_rdma_text())[("rocep8s0f0", 1)])
    reading.update(roce_counters.parse_ethtool_stats(_ethtool_text()))
    reading.update(
        req_transport_retries_exceeded=0, tx_pause_storm_warning_events=0, tx_pause_storm_error_events=0
    )
    if pfc_priority is not None:
        for direction in ("rx", "tx"):
            reading[f"{direction}_prio{pfc_priority}_pause"] = 1000
            reading[f"{direction}_prio{pfc_priority}_pause_duration"] = 50_000
    return reading


def _grown(before: dict[str, int], **growth: int) -> dict[str, int]:
    return {name: value + growth.get(name, 0) for name, value in before.items()}


def _failed(checks: list[dict[str, Any]]) -> list[str]:
    return sorted(c["name"] for c in checks if not c["ok"])


WINDOW = 60.0
HEALTHY = {
    "np_ecn_marked_roce_packets": 9000,
    "np_cnp_sent": 4000,
    "rp_cnp_handled": 3500,
    "rx_prio3_pause": 40,
}


@pytest.mark.parametrize(
    ("scenario", "growth", "failed"),
    [
        ("healthy under load: CNPs and ECN marks, no retransmits", HEALTHY, []),
        ("idle: nothing moves", {}, []),
        (
            "switch PFC off: drops, retransmits and out-of-sequence, the switch not marking",
            {"out_of_sequence": 600, "packet_seq_err": 120, "roce_adp_retrans": 300, "rx_discards_phy": 0},
            ["fabric.ecn_loop[mlx5_3]", "fabric.retransmits[mlx5_3]"],
        ),
        (
            "switch ECN off with PFC on: pauses grow (30% of the window), no CNPs",
            {"rx_prio3_pause": 90_000, "rx_prio3_pause_duration": 18_000_000},
            ["fabric.ecn_loop[mlx5_3]", "fabric.pause_duration[mlx5_3]"],
        ),
        (
            "a lossy DSCP map: retransmits while ECN still marks",
            {**HEALTHY, "local_ack_timeout_err": 70, "implied_nak_seq_err": 50},
            ["fabric.retransmits[mlx5_3]"],
        ),
        ("retransmits at the limit (1/s) pass", {**HEALTHY, "out_of_sequence": 60}, []),
        ("one queue pair gave up", {**HEALTHY, "rnr_nak_retry_err": 1}, ["fabric.qp_failures[mlx5_3]"]),
        (
            "transport retries exceeded",
            {**HEALTHY, "req_transport_retries_exceeded": 2},
            ["fabric.qp_failures[mlx5_3]"],
        ),
        (
            "pause storm warning",
            {**HEALTHY, "tx_pause_storm_warning_events": 1},
            ["fabric.pause_storm[mlx5_3]"],
        ),
        ("port buffer drops", {**HEALTHY, "rx_discards_phy": 5}, ["fabric.rx_discards[mlx5_3]"]),
        ("host rings empty", {**HEALTHY, "rx_out_of_buffer": 12}, ["fabric.rx_out_of_buffer[mlx5_3]"]),
    ],
)
def test_judge_port_names_the_failure_mode(scenario: str, growth: dict[str, int], failed: list[str]) -> None:
    before = _base()
    checks = roce_counters.judge_port("mlx5_3", before, _grown(before, **growth), WINDOW)
    assert _failed(checks) == failed, scenario
    names = [c["name"] for c in checks]
    assert len(names) == len(set(names)) == 8  # every reading present: every check judged
    assert all(c["value"] is not None and c["limit"] is not None for c in checks)


def test_judge_port_values_and_limits() -> None:
    before = _base()
    after = _grown(before, out_of_sequence=300, packet_seq_err=150, rx_prio3_pause_duration=6_000_000)
    checks = {c["name"]: c for c in roce_counters.judge_port("mlx5_3", before, after, WINDOW)}
    retrans = checks["fabric.retransmits[mlx5_3]"]
    assert (retrans["value"], retrans["limit"], retrans["unit"]) == (7.5, 1.0, "1/s")
    assert "450 lost packets and retransmits" in retrans["message"]
    pause = checks["fabric.pause_duration[mlx5_3]"]
    assert (pause["value"], pause["limit"], pause["unit"], pause["ok"]) == (10.0, 10.0, "%", True)
    ecn = checks["fabric.ecn_loop[mlx5_3]"]
    assert (ecn["ok"], ecn["value"], ecn["limit"]) == (False, 0, 1)
    assert "the switch is not marking" in ecn["message"]


def test_real_capture_without_pfc_fails_host_pfc_on_the_roce_priority() -> None:
    before = _base(pfc_priority=None)  # the capture as is: PFC off, no rx_prioN_pause
    checks = {c["name"]: c for c in roce_counters.judge_port("mlx5_3", before, before, WINDOW)}
    host = checks["fabric.host_pfc[mlx5_3]"]
    assert (host["ok"], host["value"], host["limit"]) == (False, False, True)
    assert "host PFC is off on priority 3" in host["message"]
    assert "fabric.pause_duration[mlx5_3]" not in checks  # no pause counters: nothing to judge
    # PFC on priority 5 passes when the RoCE priority is 5, fails when it is 3
    on5 = _base(pfc_priority=5)
    assert _failed(roce_counters.judge_port("mlx5_3", on5, on5, WINDOW, priority=5)) == []
    assert _failed(roce_counters.judge_port("mlx5_3", on5, on5, WINDOW)) == ["fabric.host_pfc[mlx5_3]"]


def test_counters_that_went_backwards_count_from_their_reset() -> None:
    before = _grown(_base(), out_of_sequence=10_000, rx_discards_phy=5000, np_cnp_sent=10**12)
    after = _grown(_base(), out_of_sequence=30)  # reset in the window, then 30 more
    checks = {c["name"]: c for c in roce_counters.judge_port("mlx5_3", before, after, WINDOW)}
    assert checks["fabric.retransmits[mlx5_3]"]["value"] == 0.5
    assert checks["fabric.rx_discards[mlx5_3]"]["value"] == 0.0
    assert all(c["value"] is None or c["value"] >= 0 for c in checks.values())


def test_only_hw_counters_judge_no_host_pfc() -> None:
    hw = dict(roce_counters.parse_rdma_statistic(_rdma_text())[("rocep8s0f0", 1)])
    names = [c["name"] for c in roce_counters.judge_port("mlx5_3", hw, _grown(hw, rnr_nak_retry_err=1), 10)]
    assert names == ["fabric.retransmits[mlx5_3]", "fabric.qp_failures[mlx5_3]", "fabric.ecn_loop[mlx5_3]"]


def test_thresholds_override_the_defaults() -> None:
    before = _base()
    after = _grown(before, **HEALTHY, rx_discards_phy=120)
    assert _failed(roce_counters.judge_port("mlx5_3", before, after, WINDOW)) == [
        "fabric.rx_discards[mlx5_3]"
    ]
    relaxed = roce_counters.judge_port("mlx5_3", before, after, WINDOW, thresholds={"rx_discards_per_s": 5})
    assert _failed(relaxed) == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"seconds": 0}, "seconds"),
        ({"seconds": float("nan")}, "seconds"),
        ({"seconds": -5}, "seconds"),
        ({"priority": 8}, "priority"),
        ({"thresholds": {"retransmit_per_s": 2}}, "unknown threshold"),
    ],
)
def test_judge_port_refuses_impossible_arguments(kwargs: dict[str, Any], message: str) -> None:
    arguments: dict[str, Any] = {"seconds": WINDOW, **kwargs}
    with pytest.raises(ValueError, match=message):
        roce_counters.judge_port("mlx5_3", _base(), _base(), **arguments)


# ------------------------------------------------------------------ the physical layer


def test_real_capture_has_the_phy_symbol_counters_at_zero_and_passes() -> None:
    stats = roce_counters.parse_ethtool_stats(_ethtool_text())
    # the real ConnectX-4 Lx's physical-port counters judge_phy reads (the IB counters are sysfs only)
    assert (stats["rx_symbol_err_phy"], stats["rx_pcs_symbol_err_phy"]) == (0, 0)
    checks = roce_counters.judge_phy("mlx5_3", stats, stats, WINDOW, "during the burn-in")
    assert [(c["name"], c["ok"], c["value"], c["limit"]) for c in checks] == [
        ("fabric.symbol_errors[mlx5_3]", True, 0, 2)
    ]


def test_symbol_errors_fail_above_nvsentinels_rate_counting_the_larger_layer() -> None:
    before = roce_counters.parse_ethtool_stats(_ethtool_text())
    before.update(symbol_error=100)
    # 3 minutes of load: 6 allowed (2 a minute); ethtool counted 7, the IB counter 5 of the same errors
    after = _grown(before, rx_symbol_err_phy=7, symbol_error=5)
    (symbols,) = roce_counters.judge_phy("mlx5_3", before, after, 180, "during the burn-in", "leaf02:swp8")
    assert (symbols["ok"], symbols["value"], symbols["limit"], symbols["unit"]) == (
        False,
        7,
        6,
        "symbol errors",
    )
    assert "mlx5_3 (cabled to leaf02:swp8): 7 symbol errors during the burn-in" in symbols["message"]
    assert "replace the cable" in symbols["message"]
    at_limit = _grown(before, rx_pcs_symbol_err_phy=6)
    assert roce_counters.judge_phy("mlx5_3", before, at_limit, 180, "w")[0]["ok"]
    # a window under a minute is allowed a minute's worth
    assert roce_counters.judge_phy("mlx5_3", before, _grown(before, symbol_error=2), 10, "w")[0]["ok"]
    assert not roce_counters.judge_phy("mlx5_3", before, _grown(before, symbol_error=3), 10, "w")[0]["ok"]


def test_any_link_integrity_error_or_buffer_overrun_fails() -> None:
    before = dict.fromkeys(roce_counters.PORT_COUNTERS, 0)
    clean = roce_counters.judge_phy("mlx5_0", before, before, 60, "w")
    assert [c["name"] for c in clean] == [
        "fabric.symbol_errors[mlx5_0]",
        "fabric.link_integrity[mlx5_0]",
        "fabric.buffer_overrun[mlx5_0]",
    ] and all(c["ok"] for c in clean)
    for grown, failed in (
        ({"link_error_recovery": 1}, "fabric.link_integrity[mlx5_0]"),
        ({"local_link_integrity_errors": 1}, "fabric.link_integrity[mlx5_0]"),
        ({"excessive_buffer_overrun_errors": 1}, "fabric.buffer_overrun[mlx5_0]"),
    ):
        checks = roce_counters.judge_phy("mlx5_0", before, _grown(before, **grown), 60, "w")
        assert _failed(checks) == [failed]
    # an operator's limits (roce_thresholds) reach it
    relaxed = {"link_integrity_errors": 1, "buffer_overrun_errors": 1, "symbol_errors_per_min": 100}
    grown = _grown(before, link_error_recovery=1, excessive_buffer_overrun_errors=1, symbol_error=100)
    assert _failed(roce_counters.judge_phy("mlx5_0", before, grown, 60, "w", thresholds=relaxed)) == []
    # a port without any of the counters is not judged
    assert roce_counters.judge_phy("mlx5_0", {"rx_packets_phy": 1}, {"rx_packets_phy": 2}, 60, "w") == []
