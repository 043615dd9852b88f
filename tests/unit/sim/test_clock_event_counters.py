"""Clock event reason counters (microseconds each reason was active) and the pdu-cap-in-service fault:
the thermal model counts, the fake nvidia-smi prints them as the real captures do, gpufleet's parsers
read them back. The clock is the test's: time.time() is replaced in the fault and in nvidia-smi."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.gpu import nvidia_smi as parser
from gpufleet_sim import build, faults, faults_gpu, faults_thermal, state, thermal
from gpufleet_sim.tools import nvidia_smi, nvsmi_common

COUNTERS = (
    "sw_power_cap",
    "sync_boost",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
)
COUNTER_FIELDS = ",".join(f"clocks_event_reasons_counters.{n}" for n in COUNTERS)
WAVE = (
    "index,power.limit,enforced.power.limit,clocks_event_reasons.active,"
    "clocks_event_reasons_counters.sw_power_cap"
)
REAL_CSV = "nvidia-smi-csv/utku-h100-80gb-hbm3-590.48.01-load-query-gpu.csv"
REAL_XML = "nvidia-smi-xml/telegraf-pro-6000-maxq-blackwell-v13.xml"
REAL_Q = "nvidia-smi-text/utku-h100-80gb-hbm3-590.48.01-load-q.txt"
S = 1_000_000  # microseconds


class Node:
    """A b300-16 node on disk, its clock, and nvidia-smi run at that clock."""

    def __init__(
        self, path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path.mkdir()
        (path / "sys").mkdir()
        built = build.build_node_state("node01", "b300-16", 1)
        state.save(path, built)
        self.dir, self.capsys = path, capsys
        self.t0 = float(built["thermal_t"]) + 1.0
        self.now = self.t0
        clock = SimpleNamespace(time=lambda: self.now)
        for module in (faults_gpu, faults_thermal, nvsmi_common):
            monkeypatch.setattr(module, "time", clock)

    def at(self, seconds: float) -> Node:
        self.now = self.t0 + seconds
        return self

    def smi(self, *argv: str) -> str:
        assert nvidia_smi.main(list(argv), self.dir) == 0
        return self.capsys.readouterr().out

    def rows(self, query: str, ids: str = "0,15") -> list[list[str]]:
        out = self.smi(f"--query-gpu={query}", "--format=csv,noheader,nounits", "-i", ids)
        return [line.split(", ") for line in out.splitlines()]

    def serve(self, requests: int, domain: int = 0) -> None:
        """`requests` in flight on one baseboard's GPUs from now on (what the stand-in vLLM does)."""
        with state.locked(self.dir) as current:
            uuids = [g["uuid"] for g in current["gpus"] if g["nvlink_domain"] == domain]
            thermal.change_load(current, uuids, requests, self.now)


@pytest.fixture
def node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Iterator[Node]:
    yield Node(tmp_path / "node01", monkeypatch, capsys)


def counter(row: list[str]) -> float:
    return int(row[-1]) / S


# ------------------------------------------------------------------------ pdu-cap-in-service


def test_the_pdu_caps_the_enforced_limit_five_seconds_in_every_ten_and_never_the_request(node: Node) -> None:
    faults.inject(node.dir, "pdu-cap-in-service")
    seen = {}
    for second in (0.5, 4.9, 5.1, 9.9, 10.1, 14.9, 15.1, 125.5):
        seen[second] = [tuple(row[1:3]) for row in node.at(second).rows(WAVE)]
    capped, uncapped = ("1400.00", "1100.00"), ("1400.00", "1400.00")
    assert seen == {
        0.5: [capped] * 2,
        4.9: [capped] * 2,
        5.1: [uncapped] * 2,
        9.9: [uncapped] * 2,
        10.1: [capped] * 2,
        14.9: [capped] * 2,
        15.1: [uncapped] * 2,
        125.5: [uncapped] * 2,
    }
    assert state.load(node.dir)["pdu_cap"]["since"] == node.t0
    faults.clear(node.dir, "pdu-cap-in-service")
    assert node.at(130.5).rows(WAVE)[0][1:3] == list(uncapped)
    assert "pdu_cap" not in state.load(node.dir)


def test_serving_gpus_draw_past_the_cap_so_sw_power_cap_shows_and_counts(node: Node) -> None:
    faults.inject(node.dir, "pdu-cap-in-service")
    node.serve(4)  # GPU 0 serves, GPU 15 (the other baseboard) idles
    capped = node.at(2.0).rows(WAVE + ",power.draw")
    assert capped[0][:4] == ["0", "1400.00", "1100.00", "0x0000000000000004"]
    assert capped[0][5] == "1100.00"  # held at the cap
    assert capped[1][:4] == ["15", "1400.00", "1100.00", "0x0000000000000001"]  # idle: below the cap
    assert counter(capped[0][:5]) == pytest.approx(2.0, abs=1e-3) and capped[1][4] == "0"
    free = node.at(7.0).rows(WAVE + ",power.draw")
    assert free[0][2:4] == ["1400.00", "0x0000000000000000"]
    assert float(free[0][5]) > 1100.0 + 100  # what the cap takes away while it is down
    assert counter(free[0][:5]) == pytest.approx(5.0, abs=1e-3)  # the capped half only
    # three periods later: 5 s of every 10, however the reads fall
    assert counter(node.at(35.0).rows(WAVE)[0]) == pytest.approx(20.0, abs=1e-3)


@pytest.mark.parametrize("requests", [2, 4, 8])
def test_a_modest_serving_load_exceeds_the_capped_limit(node: Node, requests: int) -> None:
    faults.inject(node.dir, "pdu-cap-in-service")
    node.serve(requests)
    row = node.at(6.0).rows("power.draw,enforced.power.limit", ids="0")[0]
    assert float(row[0]) > 1100.0 and row[1] == "1400.00"


def test_the_cap_slows_the_clocks_the_stand_in_vllm_serves_at(node: Node) -> None:
    faults.inject(node.dir, "pdu-cap-in-service")
    node.serve(4)
    current = state.load(node.dir)
    capped, _ = thermal.readings(current, node.t0 + 2.0)
    free, _ = thermal.readings(current, node.t0 + 7.0)
    # (1100 - 180 idle) / (0.9 * 1220 dynamic): the engine's requests take ~19 % longer
    assert capped[0].clock_factor == pytest.approx(920 / 1098, rel=1e-3)
    assert free[0].clock_factor == 1.0
    assert node.at(2.0).rows("clocks.sm", ids="0")[0] == [str(round(1965 * 920 / 1098))]


def test_counters_do_not_depend_on_when_the_model_is_advanced(node: Node) -> None:
    faults.inject(node.dir, "pdu-cap-in-service")
    node.serve(4)
    for second in (0.3, 3.7, 4.99, 5.01, 12.2, 19.0):  # request starts and ends move the anchor
        node.at(second).serve(1)
        node.at(second + 0.1).serve(-1)
    assert counter(node.at(1000.0).rows(WAVE)[0]) == pytest.approx(500.0, abs=1e-3)
    # a read after a long quiet spell takes long steps (2.5 s): the wave is weighted, not sampled
    assert counter(node.at(3000.0).rows(WAVE)[0]) == pytest.approx(1500.0, abs=1e-3)


def test_clearing_stops_the_count_and_keeps_what_was_counted(node: Node) -> None:
    faults.inject(node.dir, "pdu-cap-in-service")
    node.serve(4)
    node.at(3.0)
    faults.clear(node.dir, "pdu-cap-in-service")
    assert node.at(3.0).rows(WAVE)[0][2:] == ["1400.00", "0x0000000000000000", "3000000"]
    assert node.at(60.0).rows(WAVE)[0][4] == "3000000"


# ------------------------------------------------------------------------ the other counters


def test_a_hot_gpu_counts_its_thermal_slowdowns_under_load(node: Node) -> None:
    faults.inject(node.dir, "hot-gpu")
    with state.locked(node.dir) as current:
        hot = next(g for g in current["gpus"] if g["slot"] == faults_thermal.HOT_GPU_SLOT)
        uuid = hot["uuid"]
        thermal.change_load(current, [uuid], 4, node.now)
    row = node.at(120.0).rows(f"uuid,clocks_event_reasons.active,{COUNTER_FIELDS}", ids=uuid)[0]
    reasons = parser.decode_reasons(row[1])
    assert reasons is not None and "sw_thermal_slowdown" in reasons
    counted = dict(zip(COUNTERS, (int(v) / S for v in row[2:]), strict=True))
    assert 60.0 < counted["sw_thermal_slowdown"] <= 120.0
    assert counted["sw_power_cap"] == counted["sync_boost"] == counted["hw_power_brake_slowdown"] == 0


def test_a_reason_held_in_the_state_counts_for_as_long_as_it_is_held(node: Node) -> None:
    with state.locked(node.dir) as current:
        state.present_gpus(current)[5]["clocks_event_reasons"] = ["hw_power_brake_slowdown"]
    # held from the model's anchor on (a second before the test's clock starts)
    assert node.at(0.0).rows(COUNTER_FIELDS, ids="5") == [["0", "0", "0", "0", str(1 * S)]]
    assert node.at(42.0).rows(COUNTER_FIELDS, ids="5,6") == [["0", "0", "0", "0", str(43 * S)], ["0"] * 5]


def test_a_node_at_rest_counts_nothing(node: Node) -> None:
    assert node.at(86400.0).rows(COUNTER_FIELDS, ids="0") == [["0"] * 5]


# ------------------------------------------------------------------------ as the real tools print them


def set_counters(node: Node, values: dict[str, int]) -> None:
    with state.locked(node.dir) as current:
        state.present_gpus(current)[0]["thermal"]["reasons_us"] = values


def test_csv_headers_and_cells_are_the_real_ones(node: Node, read_fixture: Callable[[str], str]) -> None:
    header, row = list(csv.reader(io.StringIO(read_fixture(REAL_CSV)), skipinitialspace=True))
    real = {h: v for h, v in zip(header, row, strict=True) if h.startswith("clocks_event_reasons_counters.")}
    set_counters(node, dict.fromkeys(COUNTERS, 0) | {"sw_power_cap": 25483012608})
    out = node.smi(f"--query-gpu={COUNTER_FIELDS}", "--format=csv", "-i", "0")
    assert out.splitlines()[0] == ", ".join(real)  # "clocks_event_reasons_counters.sw_power_cap [us], ..."
    assert out.splitlines()[1] == "25483012608 us, 0 us, 0 us, 0 us, 0 us"
    assert set(real.values()) == {"0 us"}
    nounits = node.smi(f"--query-gpu={COUNTER_FIELDS}", "--format=csv,noheader,nounits", "-i", "0")
    assert nounits == "25483012608, 0, 0, 0, 0\n"
    parsed = parser.parse_query_csv(out)
    assert parsed == [
        {f"clocks_event_reasons_counters.{n}": 25483012608 if n == "sw_power_cap" else 0 for n in COUNTERS}
    ]


def test_xml_counters_are_the_v13_elements(node: Node, read_fixture: Callable[[str], str]) -> None:
    real = re.search(
        r"\t\t<clocks_event_reasons_counters>\n.*?</clocks_event_reasons_counters>\n",
        read_fixture(REAL_XML),
        re.S,
    )
    assert real is not None
    set_counters(node, dict.fromkeys(COUNTERS, 0) | {"sw_power_cap": 25483012608})
    out = node.smi("-q", "-x", "-i", "0")
    assert real.group(0) in out  # byte for byte, the capture's sw_power_cap 25483012608 us included
    assert parser.parse_query_xml(out)["gpus"][0]["power"]["enforced_limit_w"] == 1400.0


def test_text_counters_are_the_590_block(node: Node, read_fixture: Callable[[str], str]) -> None:
    real = re.search(r"    Clocks Event Reasons Counters\n(        .*\n){5}", read_fixture(REAL_Q))
    assert real is not None
    out = node.smi("-q", "-i", "0")
    assert real.group(0) in out  # all "0 us" at rest, as on the capture
    set_counters(
        node,
        {
            "sw_power_cap": 7,
            "sync_boost": 0,
            "sw_thermal_slowdown": 0,
            "hw_thermal_slowdown": 12,
            "hw_power_brake_slowdown": 3,
        },
    )
    lines = node.smi("-q", "-i", "0").splitlines()
    start = lines.index("    Clocks Event Reasons Counters")
    assert [line.split(" : ")[-1] for line in lines[start + 1 : start + 6]] == [
        "7 us",
        "0 us",
        "0 us",
        "12 us",
        "3 us",
    ]


def test_the_capped_node_still_parses_everywhere(node: Node) -> None:
    faults.inject(node.dir, "pdu-cap-in-service")
    node.serve(4)
    node.at(3.0)
    power = parser.parse_power_sample(node.smi(*parser.power_query("nvidia-smi")[1:]))
    assert {(p["power"]["requested_limit_w"], p["power"]["enforced_limit_w"]) for p in power} == {
        (1400.0, 1100.0)
    }
    thermal_rows = parser.parse_thermal_sample(node.smi(*parser.thermal_query("nvidia-smi")[1:]))
    assert [r["reasons"] for r in thermal_rows[:8]] == [["sw_power_cap"]] * 8
    assert [r["reasons"] for r in thermal_rows[8:]] == [["gpu_idle"]] * 8
    xml = parser.parse_query_xml(node.smi("-q", "-x"))["gpus"]
    assert [g["clocks_event_reasons"] for g in xml[:8]] == [["sw_power_cap"]] * 8
    assert {g["power"]["enforced_limit_w"] for g in xml} == {1100.0}
    text = parser.parse_query_text(node.smi("-q"))["gpus"]
    assert [g["clocks_event_reasons"] for g in text] == [g["clocks_event_reasons"] for g in xml]
