"""The thermal model: coolant, flow and load heat the GPUs with a lag, and too much heat throttles."""

from __future__ import annotations

import copy
import itertools
import time
from pathlib import Path

import pytest
from gpufleet_sim import boot, build, faults, faults_thermal, state, sysfs, thermal
from gpufleet_sim.tools import nvidia_smi

Node = state.State
QUERY = "index,temperature.gpu,temperature.memory,temperature.gpu.tlimit,utilization.gpu,clocks.sm,power.draw"


def node(profile: str = "b300-16") -> Node:
    return build.build_node_state("node01", profile, 1)


def domain_uuids(current: Node, domain: int = 0) -> list[str]:
    return [g["uuid"] for g in current["gpus"] if g["nvlink_domain"] == domain]


def loaded(current: Node, requests: int = 1, domain: int = 0) -> tuple[Node, float]:
    """A copy with `requests` in flight on one baseboard's GPUs from t0 on."""
    copied = copy.deepcopy(current)
    t0 = float(copied["thermal_t"])
    thermal.change_load(copied, domain_uuids(copied, domain), requests, t0)
    return copied, t0


def with_flow(current: Node, share: float) -> Node:
    copied = copy.deepcopy(current)
    copied["cooling"]["flow_lpm"] = copied["cooling"]["nominal_flow_lpm"] * share
    thermal.settle(copied, float(copied["thermal_t"]))
    return copied


def first(current: Node, at: float) -> thermal.GpuReading:
    return thermal.readings(current, at)[0][0]


@pytest.mark.parametrize(("profile", "idle_c", "idle_w"), [("b300-16", 31, 180.0), ("h100-8", 30, 69.0)])
def test_an_idle_node_reads_its_profile_exactly_however_long_it_rests(
    profile: str, idle_c: int, idle_w: float
) -> None:
    current = node(profile)
    for later in (0.0, 5.0, 3600.0, 86400.0):
        view = thermal.live(current, float(current["thermal_t"]) + later)
        assert {g["temperature"]["gpu_c"] for g in view["gpus"]} == {idle_c}
        assert {g["power"]["draw_w"] for g in view["gpus"]} == {idle_w}
        assert {tuple(g["clocks_event_reasons"]) for g in view["gpus"]} == {("gpu_idle",)}
        assert {g["utilization_pct"] for g in view["gpus"]} == {0}


def test_load_heats_with_first_order_lags_toward_a_safe_steady_state() -> None:
    current, t0 = loaded(node())
    for key, tau in (("die_c", thermal.DIE_TAU_S), ("memory_c", thermal.MEMORY_TAU_S)):
        temps = [getattr(first(current, t0 + t), key) for t in (0, tau, 10 * tau, 40 * tau)]
        start, final = temps[0], temps[-1]
        assert temps == sorted(temps)
        # one lag in: a first-order lag's 63 % (the die's a little less: the coolant warms with it)
        assert 0.55 < (temps[1] - start) / (final - start) < 0.68
        assert temps[2] == pytest.approx(final, abs=0.05)  # ten lags in: settled
    assert first(current, t0).die_c == pytest.approx(31, abs=0.01)
    final = first(current, t0 + 40 * thermal.MEMORY_TAU_S)
    assert 50 < final.die_c < 70  # a healthy loop carries full load well below max operating (85 C)
    assert final.reasons == frozenset() and final.clock_factor == 1.0
    assert final.utilization_pct == thermal.BUSY_PCT_ONE_REQUEST


def test_only_the_loaded_gpus_heat_and_their_loop_carries_the_heat() -> None:
    current, t0 = loaded(node(), requests=3)
    gpus, loops = thermal.readings(current, t0 + 300)
    by_domain: dict[int, list[float]] = {0: [], 1: []}
    for gpu, reading in zip(current["gpus"], gpus, strict=True):
        by_domain[gpu["nvlink_domain"]].append(reading.die_c)
    assert min(by_domain[0]) > 55 and max(by_domain[1]) < 32
    hot, cool = loops
    assert hot.delta_c > 3 * cool.delta_c and cool.delta_c == pytest.approx(2.1, abs=0.1)
    # at steady state the heat the coolant carries is the board's power plus its other heat
    power = sum(r.power_w for g, r in zip(current["gpus"], gpus, strict=True) if g["nvlink_domain"] == 0)
    assert hot.heat_w == pytest.approx(power + current["cooling"]["base_load_w"] / 2, rel=0.01)
    assert hot.return_c == pytest.approx(hot.supply_c + hot.heat_w / (hot.flow_lpm * thermal.WATTS_PER_LPM_K))


def test_low_flow_looks_fine_at_idle_and_throttles_within_seconds_of_load() -> None:
    low = with_flow(node(), faults_thermal.LOW_FLOW_SHARE)
    t0 = float(low["thermal_t"])
    idle = first(low, t0)
    assert 35 < idle.die_c < 45 and idle.reasons == frozenset() and idle.clock_factor == 1.0
    busy, t0 = loaded(low)
    samples = [first(busy, t0 + k * 0.25) for k in range(241)]
    throttled = [k * 0.25 for k, s in enumerate(samples) if s.reasons]
    # The die's sub-second lag: it passes max operating about a second into the load (0.75-1 s
    # here, from 40 C toward ~117 C), so a weak loop fails even a 5 s burn-in; from then on SW
    # slowdown holds it past max operating (T.Limit at or below 0), below the HW trip.
    assert throttled == [k * 0.25 for k in range(4, 241)]
    for s in samples[4:]:
        assert s.reasons == {"sw_thermal_slowdown"} and s.clock_factor < 0.8 and 85 <= s.die_c < 87
    # the same load on the healthy loop stays cool
    healthy, t0 = loaded(node())
    assert first(healthy, t0 + 60).reasons == frozenset()


def test_heavy_load_on_low_flow_trips_hw_slowdown_with_hysteresis() -> None:
    low = with_flow(node(), 0.1)
    busy, t0 = loaded(low, requests=6)
    samples = [first(busy, t0 + t) for t in range(0, 181, 2)]
    hot = [s for s in samples if "hw_thermal_slowdown" in s.reasons]
    assert hot and all(s.clock_factor <= thermal.HW_SLOWDOWN_FACTOR for s in hot)
    # latched below the trip point, released only HW_RELEASE_C under it
    gpu = thermal._params(busy)[0]
    assert thermal._operate(gpu, gpu.slowdown_c - 1, True, 80)[3] is True
    assert thermal._operate(gpu, gpu.slowdown_c - 1, False, 80)[3] is False
    assert thermal._operate(gpu, gpu.slowdown_c - thermal.HW_RELEASE_C, True, 80)[3] is False


@pytest.mark.parametrize(
    ("share", "requests", "transitions"),
    [
        # the weak loop: SW slowdown holds the die below the HW trip (~86.7 C), never HW
        (faults_thermal.LOW_FLOW_SHARE, 4, 0),
        # SW cannot hold it: the die reaches the trip and stays latched past it (~87.6 C)
        (0.1, 6, 1),
        # latched, it would cool below the release, unlatched heat past the trip: a real die cycles
        # many times a second; the model keeps it latched at the release instead of every 0.5 s step
        (0.2, 4, 1),
    ],
)
def test_a_loaded_low_flow_gpu_never_flips_in_and_out_of_hw_slowdown(
    share: float, requests: int, transitions: int
) -> None:
    busy, t0 = loaded(with_flow(node(), share), requests)
    hw = [False]
    for k in range(1, 481):  # two minutes, the anchor moved every 0.25 s as requests come and go
        thermal.advance(busy, t0 + k * 0.25)
        hw.append(first(busy, t0 + k * 0.25).hw_slowdown)
    assert sum(a != b for a, b in itertools.pairwise(hw)) == transitions and hw[-1] == bool(transitions)


def test_supply_temperature_shifts_idle_gpus_one_for_one() -> None:
    warm = node()
    warm["cooling"]["supply_c"] += 5
    thermal.settle(warm, float(warm["thermal_t"]))
    assert thermal.live(warm, float(warm["thermal_t"]))["gpus"][0]["temperature"]["gpu_c"] == 36


def test_utilization_decays_after_the_last_request() -> None:
    current, t0 = loaded(node())
    thermal.change_load(current, domain_uuids(current), -1, t0 + 10)
    utils = [first(current, t0 + 10 + t).utilization_pct for t in (0, 3, 9, 30)]
    assert utils[0] == thermal.BUSY_PCT_ONE_REQUEST
    assert utils[1] == pytest.approx(utils[0] / 2.718, rel=0.01) and utils[3] < 0.1


def test_a_power_cap_binds_under_load() -> None:
    current = node()
    for gpu in current["gpus"]:
        gpu["power"]["enforced_limit_w"] = 900.0
    busy, t0 = loaded(current, requests=6)
    reading = first(busy, t0 + 30)
    assert reading.power_w == pytest.approx(900.0) and "sw_power_cap" in reading.reasons
    assert reading.clock_factor < 1


def test_hot_gpu_is_hot_at_idle_and_only_that_gpu(tmp_path: Path) -> None:
    state.save(tmp_path, node())
    faults.inject(tmp_path, "hot-gpu")
    view = thermal.live(state.load(tmp_path), float(state.load(tmp_path)["thermal_t"]))
    temps = {g["slot"]: g["temperature"] for g in view["gpus"]}
    hot = temps.pop(faults_thermal.HOT_GPU_SLOT)
    assert hot["gpu_c"] == 84 and hot["max_operating_c"] - hot["gpu_c"] == 1 and hot["memory_c"] >= 95
    assert {t["gpu_c"] for t in temps.values()} == {31}
    faults.clear(tmp_path, "hot-gpu")
    cleared = thermal.live(state.load(tmp_path), float(state.load(tmp_path)["thermal_t"]))
    assert {g["temperature"]["gpu_c"] for g in cleared["gpus"]} == {31}


def test_physical_faults_survive_a_reboot_and_load_does_not(tmp_path: Path) -> None:
    state.save(tmp_path, node())
    sysfs.render(tmp_path / "sys", state.load(tmp_path))
    faults.inject(tmp_path, "low-coolant-flow")
    with state.locked(tmp_path) as current:
        thermal.change_load(current, domain_uuids(current), 2, float(current["thermal_t"]))
        current["gpus"][0]["memory_used_mib"] = 1000
        boot.power_cycle(current, tmp_path / "sys")
    after = state.load(tmp_path)
    assert after["cooling"]["flow_lpm"] == pytest.approx(after["cooling"]["nominal_flow_lpm"] / 4, abs=0.1)
    assert {g["load"]["requests"] for g in after["gpus"]} == {0} and after["gpus"][0]["memory_used_mib"] == 0
    assert {"hot-gpu", "low-coolant-flow"} <= set(boot.PERSISTENT_FAULTS)


def test_nvidia_smi_reports_the_modelled_values(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a minute of load on baseboard 0 of a low-flow node, as of now
    low = with_flow(node(), faults_thermal.LOW_FLOW_SHARE)
    start = time.time() - 60
    low["thermal_t"] = start
    for gpu in low["gpus"]:
        gpu["load"]["t"] = start
    thermal.change_load(low, domain_uuids(low), 1, start)
    state.save(tmp_path, low)
    assert nvidia_smi.main([f"--query-gpu={QUERY}", "--format=csv,noheader,nounits"], tmp_path) == 0
    rows = [[v.strip() for v in line.split(",")] for line in capsys.readouterr().out.splitlines()]
    order = state.present_gpus(state.load(tmp_path))
    busy = [r for r, g in zip(rows, order, strict=True) if g["nvlink_domain"] == 0]
    rest = [r for r, g in zip(rows, order, strict=True) if g["nvlink_domain"] == 1]
    for _, temp, _, tlimit, util, sm, _ in busy:
        assert int(temp) >= 85 and int(tlimit) <= 0 and int(util) == 75 and int(sm) < 1965 * 0.8
    for _, temp, _, _, util, sm, power in rest:
        assert int(temp) < 45 and int(util) == 0 and int(sm) == 1965 and float(power) == 180.0
    assert nvidia_smi.main(["-q", "-d", "PERFORMANCE", "-i", "0"], tmp_path) == 0
    text = capsys.readouterr().out
    section = text.split("Clocks Event Reasons\n", 1)[1].split("Clocks Event Reasons Counters", 1)[0]
    reasons = {k.strip(): v.strip() for k, _, v in (line.partition(" : ") for line in section.splitlines())}
    assert reasons["SW Thermal Slowdown"] == "Active" and reasons["Idle"] == "Not Active"
