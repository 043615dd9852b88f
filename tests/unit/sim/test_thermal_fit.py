"""The h200 profile's thermal model against the real H200 trace (tests/fixtures/real/h200-device/).

The simulated node runs the capture's schedule (idle, 60 s of full load on every GPU, cool-down),
read every 0.23 s as nvidia-smi would print it; its figures must stay within the tolerances below
of the real trace's, so a change that drifts the model away from the capture fails here.
"""

from __future__ import annotations

import pytest

from gpufleet.sim import build, thermal
from tests.unit.sim.thermal_trace import Figures, Sample, figures, real_trace

SAMPLE_S = 0.23
IDLE_S = 10.0
COOL_S = 50.0
FULL_LOAD_REQUESTS = 6  # busy_pct reaches 100 % at six in-flight requests
# Tolerances: a sensor reads whole degrees and the real die wobbles ±1 C on its plateau; times are
# within a couple of samples (die) or a fifth (HBM's slow climb); power and clocks as the real
# ones scatter under the cap (±10 W, ±50 MHz around their medians).
TEMPERATURE_TOL_C = 1.5
DIE_TIME_TOL_S = 0.6
MEMORY_TIME_TOL_S = 3.0
POWER_TOL_W = 15.0
SM_CLOCK_TOL_MHZ = 50.0
POWER_LIMIT_W = 700.0
MAX_SM_MHZ = 1980.0


def simulated_trace(load_s: float) -> list[Sample]:
    """The h200 node under the real trace's schedule, sampled from its first GPU's display."""
    node = build.build_node_state("node01", "h200", 1)
    start = float(node["thermal_t"]) + IDLE_S
    uuids = [gpu["uuid"] for gpu in node["gpus"]]
    samples: list[Sample] = []
    t, loading, done = -IDLE_S, False, False
    while t < load_s + COOL_S:
        if not loading and t >= 0:
            thermal.change_load(node, uuids, FULL_LOAD_REQUESTS, start)
            loading = True
        if loading and not done and t >= load_s:
            thermal.change_load(node, uuids, -FULL_LOAD_REQUESTS, start + load_s)
            done = True
        gpu = thermal.live(node, start + t)["gpus"][0]
        samples.append(
            Sample(
                t,
                float(gpu["temperature"]["gpu_c"]),
                float(gpu["temperature"]["memory_c"]),
                float(gpu["power"]["draw_w"]),
                float(gpu["clocks"]["sm_mhz"]),
                "sw_power_cap" in gpu["clocks_event_reasons"],
            )
        )
        t = round(t + SAMPLE_S, 6)
    return samples


@pytest.fixture(scope="module")
def real_and_simulated() -> tuple[Figures, Figures]:
    samples, load_s = real_trace()
    return figures(samples, load_s), figures(simulated_trace(load_s), load_s)


def test_the_real_trace_shows_a_fast_die_a_slow_hbm_and_a_capped_gpu(
    real_and_simulated: tuple[Figures, Figures],
) -> None:
    real, _ = real_and_simulated
    assert real.plateau_die_c - real.idle_die_c > 20 and real.die_rise_90_s < 3 and real.die_fall_90_s < 4
    assert real.memory_rise_90_s > 5 * real.die_rise_90_s
    assert real.load_power_w == pytest.approx(POWER_LIMIT_W, abs=POWER_TOL_W)
    assert 0.7 < real.load_sm_mhz / MAX_SM_MHZ < 0.8  # ~25 % below max under the cap
    assert real.power_capped_share == 1.0


def test_plateau_temperatures_match_the_real_h200(real_and_simulated: tuple[Figures, Figures]) -> None:
    real, sim = real_and_simulated
    assert sim.idle_die_c == pytest.approx(real.idle_die_c, abs=TEMPERATURE_TOL_C)
    assert sim.plateau_die_c == pytest.approx(real.plateau_die_c, abs=TEMPERATURE_TOL_C)
    assert sim.idle_memory_c == pytest.approx(real.idle_memory_c, abs=TEMPERATURE_TOL_C)
    assert sim.plateau_memory_c == pytest.approx(real.plateau_memory_c, abs=TEMPERATURE_TOL_C)


def test_die_rises_and_falls_in_seconds_and_hbm_follows_slowly(
    real_and_simulated: tuple[Figures, Figures],
) -> None:
    real, sim = real_and_simulated
    assert sim.die_rise_90_s == pytest.approx(real.die_rise_90_s, abs=DIE_TIME_TOL_S)
    assert sim.die_fall_90_s == pytest.approx(real.die_fall_90_s, abs=DIE_TIME_TOL_S)
    assert sim.memory_rise_90_s == pytest.approx(real.memory_rise_90_s, abs=MEMORY_TIME_TOL_S)


def test_under_load_the_gpu_sits_on_its_power_limit_with_clocks_a_quarter_down(
    real_and_simulated: tuple[Figures, Figures],
) -> None:
    real, sim = real_and_simulated
    assert sim.load_power_w == pytest.approx(real.load_power_w, abs=POWER_TOL_W)
    assert sim.load_sm_mhz == pytest.approx(real.load_sm_mhz, abs=SM_CLOCK_TOL_MHZ)
    assert sim.power_capped_share == real.power_capped_share == 1.0
