"""The gate's thermal outcomes the integration tests rely on, from the thermal model and the gate's
own judges on a simulated clock (no fleet): a b300-16 node on a weak loop (the low-coolant-flow
fault) passes the idle gate and fails a 30 s burn-in under load (tests/integration/test_gate_faults.py);
a healthy node passes both and a 5 s burn-in (test_watch, conftest.serve_as_a_passed_gate_leaves).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.thermal import burn_in
from ansible_collections.gpufleet.node.plugins.module_utils.thermal import thermal_verdict as tv
from gpufleet_sim import build, faults_thermal, state, thermal
from gpufleet_sim.tools import nvsmi_common

from tests.unit.fake_clock import FakeClock

# The burn-in's load: each instance's 4 requests in flight (the module's default concurrency) on
# every GPU; the instances start a minute after the idle gate (vLLM, the NCCL test).
REQUESTS = 4
BURN_IN_AFTER_S = 60.0


class Load:
    """The burn-in's vLLM load as the thermal model sees it."""

    def __init__(self, node: state.State, clock: FakeClock) -> None:
        self.node, self.clock = node, clock
        self.uuids = [g["uuid"] for g in node["gpus"]]

    def start(self) -> None:
        thermal.change_load(self.node, self.uuids, REQUESTS, self.clock())

    def stop(self) -> dict[str, Any]:
        thermal.change_load(self.node, self.uuids, -REQUESTS, self.clock())
        return {}


def readings(node: state.State, now: float) -> list[dict[str, Any]]:
    """What the gate's nvidia-smi thermal query reads (parse_thermal_sample's shape)."""
    return [
        {
            "uuid": g["uuid"],
            "index": i,
            "gpu_c": g["temperature"]["gpu_c"],
            "memory_c": g["temperature"]["memory_c"],
            "tlimit_c": nvsmi_common.tlimit_c(g),
            "reasons": g["clocks_event_reasons"],
            "utilization_pct": g["utilization_pct"],
            "power_w": g["power"]["draw_w"],
        }
        for i, g in enumerate(thermal.live(node, now)["gpus"])
    ]


def gate(weak_loop: bool, burn_in_s: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the idle gate's thermal checks, the burn-in's) of one node."""
    node = build.build_node_state("node01", "b300-16", 1)
    if weak_loop:
        faults_thermal.low_coolant_flow(node, Path("/nonexistent"))
    clock = FakeClock(float(node["thermal_t"]))
    idle = tv.gpu_checks(readings(node, clock()), tv.IDLE_LIMITS)
    clock.sleep(BURN_IN_AFTER_S)
    watch = burn_in.Watch(burn_in.DEFAULT_LIMITS)

    def sample() -> list[dict[str, Any]]:
        return readings(node, clock())

    result = burn_in.run(sample, Load(node, clock), burn_in_s, 1.0, watch, clock=clock, sleep=clock.sleep)
    loaded = [c for c in burn_in.checks(result, burn_in.DEFAULT_LIMITS) if c["name"].startswith("thermal.")]
    return idle, loaded


@pytest.mark.parametrize("burn_in_s", [5, 30])
def test_a_healthy_node_passes_idle_and_its_burn_in(burn_in_s: int) -> None:
    idle, loaded = gate(weak_loop=False, burn_in_s=burn_in_s)
    assert [c for c in idle + loaded if not c["ok"]] == []


def test_a_weak_loop_passes_idle_and_fails_a_30_s_burn_in_on_temperature_margin_and_throttling() -> None:
    idle, loaded = gate(weak_loop=True, burn_in_s=30)
    assert [c for c in idle if not c["ok"]] == []
    failed = {c["name"].split("[")[0] for c in loaded if not c["ok"]}
    # its dies pass max operating within seconds of the load, where SW slowdown holds them
    assert failed == {"thermal.gpu_temp_c", "thermal.tlimit_c", "thermal.clocks_event_reasons"}
