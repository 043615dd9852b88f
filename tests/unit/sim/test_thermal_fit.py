"""The h200 profile's thermal model against the real H200 trace (tests/fixtures/real/h200-device/).

The simulated node runs the capture's schedule (idle, 60 s of full load on every GPU, cool-down),
read every 0.23 s as nvidia-smi would print it; its figures must stay within the tolerances below
of the real trace's, so a change that drifts the model away from the capture fails here.
"""

from __future__ import annotations

import pytest
from gpufleet_sim import build, thermal

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


def simulated_trace(load_s: float, profile: str = "h200") -> list[Sample]:
    """A node of the profile under the real trace's schedule, sampled from its first GPU's display."""
    node = build.build_node_state("node01", profile, 1)
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
def real_figures() -> Figures:
    samples, load_s = real_trace()
    return figures(samples, load_s)


@pytest.fixture(scope="module")
def real_and_simulated(real_figures: Figures) -> tuple[Figures, Figures]:
    _, load_s = real_trace()
    return real_figures, figures(simulated_trace(load_s), load_s)


def test_the_real_trace_shows_a_fast_die_a_slow_hbm_and_a_capped_gpu(
    real_and_simulated: tuple[Figures, Figures],
) -> None:
    real, _ = real_and_simulated
    assert real.plateau_die_c - real.idle_die_c > 20 and real.die_rise_90_s < 3 and real.die_fall_90_s < 4
    assert real.memory_rise_90_s > 5 * real.die_rise_90_s
    assert real.load_power_w == pytest.approx(POWER_LIMIT_W, abs=POWER_TOL_W)
    assert 0.7 < real.load_sm_mhz / MAX_SM_MHZ < 0.8  # ~25 % below max under the cap
    assert real.power_capped_share == 1.0


# Each figure of the simulated trace against the real one: plateaus, how fast the die rises and falls
# (in seconds) and HBM follows (slowly), and a GPU on its power limit with its clocks a quarter down.
MATCHED = [
    ("idle_die_c", TEMPERATURE_TOL_C),
    ("plateau_die_c", TEMPERATURE_TOL_C),
    ("idle_memory_c", TEMPERATURE_TOL_C),
    ("plateau_memory_c", TEMPERATURE_TOL_C),
    ("die_rise_90_s", DIE_TIME_TOL_S),
    ("die_fall_90_s", DIE_TIME_TOL_S),
    ("memory_rise_90_s", MEMORY_TIME_TOL_S),
    ("load_power_w", POWER_TOL_W),
    ("load_sm_mhz", SM_CLOCK_TOL_MHZ),
]


@pytest.mark.parametrize(("figure", "tolerance"), MATCHED, ids=[m[0] for m in MATCHED])
def test_the_simulated_h200_matches_the_real_trace(
    real_and_simulated: tuple[Figures, Figures], figure: str, tolerance: float
) -> None:
    real, sim = real_and_simulated
    assert getattr(sim, figure) == pytest.approx(getattr(real, figure), abs=tolerance)


# The other profiles keep their own limits and power and take the fitted lags: on a healthy loop
# under full load their die and HBM reach 90 % of their rise as fast as the real H200's, within the
# same tolerances (not their fall: their utilization decays over UTIL_TAU_S, the matmul's at once).
LAGGED = [("die_rise_90_s", DIE_TIME_TOL_S), ("memory_rise_90_s", MEMORY_TIME_TOL_S)]


@pytest.mark.parametrize("profile", ["b300-16", "h100-8"])
def test_the_other_profiles_heat_as_fast_as_the_real_trace(real_figures: Figures, profile: str) -> None:
    _, load_s = real_trace()
    sim = figures(simulated_trace(load_s, profile), load_s)
    for figure, tolerance in LAGGED:
        assert getattr(sim, figure) == pytest.approx(getattr(real_figures, figure), abs=tolerance), figure


def test_under_load_the_gpu_is_power_capped_in_every_sample(
    real_and_simulated: tuple[Figures, Figures],
) -> None:
    real, sim = real_and_simulated
    assert sim.power_capped_share == real.power_capped_share == 1.0
