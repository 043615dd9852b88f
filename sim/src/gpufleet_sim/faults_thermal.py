"""Cooling, BMC and serving faults: what goes wrong around a maintenance window.

Physical faults settle the thermal model at once: the operator looks after the fault has been
there for a while, so a hot GPU is already hot. Each inject is idempotent (a reboot re-applies
the persistent ones) and each clear restores the healthy value.
"""

from __future__ import annotations

import time
from pathlib import Path

from gpufleet_sim import thermal
from gpufleet_sim.bmc import passwords
from gpufleet_sim.state import State

# hot-gpu: the GPU in this physical slot has a mis-seated cold plate (or its TIM pumped out), so
# it idles at 84 C (T.Limit 1 C, HBM ~96 C) and throttles as soon as it works.
HOT_GPU_SLOT = 5
HOT_GPU_IDLE_C = 84.0
# low-coolant-flow: a valve left part-closed after the loop was drained: a quarter of the healthy
# flow. Idle GPUs gain ~9 C and look fine; under load the plates cannot carry the heat.
LOW_FLOW_SHARE = 0.25
# prefix-cache-cliff: a prompt template that put a timestamp in the prefix.
HEALTHY_HIT_RATE = 0.9
CLIFF_HIT_RATE = 0.07


def _hot_gpu(state: State) -> thermal.Gpu:
    return next(g for g in state["gpus"] if g["slot"] == min(HOT_GPU_SLOT, len(state["gpus"]) - 1))


def hot_gpu(state: State, sys_root: Path) -> None:
    now = time.time()
    thermal.advance(state, now)
    gpu = _hot_gpu(state)
    gpu["thermal"]["plate_factor"] = thermal.plate_factor_for(state, gpu, HOT_GPU_IDLE_C)
    thermal.settle(state, now)


def hot_gpu_clear(state: State, sys_root: Path) -> None:
    now = time.time()
    thermal.advance(state, now)
    _hot_gpu(state)["thermal"]["plate_factor"] = 1.0
    thermal.settle(state, now)


def _set_flow(state: State, share: float) -> None:
    now = time.time()
    thermal.advance(state, now)
    cooling = state["cooling"]
    cooling["flow_lpm"] = round(float(cooling["nominal_flow_lpm"]) * share, 1)
    thermal.settle(state, now)


def low_coolant_flow(state: State, sys_root: Path) -> None:
    _set_flow(state, LOW_FLOW_SHARE)


def low_coolant_flow_clear(state: State, sys_root: Path) -> None:
    _set_flow(state, 1.0)


def bmc_down(state: State, sys_root: Path) -> None:
    state.setdefault("bmc", {})["state"] = "down"


def bmc_up(state: State, sys_root: Path) -> None:
    state.setdefault("bmc", {})["state"] = "up"


def bmc_bad_credentials(state: State, sys_root: Path) -> None:
    """Someone changed the BMC password (a firmware update reset it, a colleague rotated it)."""
    bmc = state.setdefault("bmc", {})
    bmc.setdefault("saved_password", {"salt": bmc.get("salt"), "password_hash": bmc.get("password_hash")})
    bmc.update(passwords.hashed(passwords.new_password()))


def bmc_credentials_restored(state: State, sys_root: Path) -> None:
    bmc = state.setdefault("bmc", {})
    bmc.update(bmc.pop("saved_password", {}))


def prefix_cache_cliff(state: State, sys_root: Path) -> None:
    state.setdefault("serving", {})["prefix_cache_hit_rate"] = CLIFF_HIT_RATE


def prefix_cache_restored(state: State, sys_root: Path) -> None:
    state.setdefault("serving", {})["prefix_cache_hit_rate"] = HEALTHY_HIT_RATE


FAULTS = {
    "hot-gpu": (hot_gpu, hot_gpu_clear),
    "low-coolant-flow": (low_coolant_flow, low_coolant_flow_clear),
    "bmc-down": (bmc_down, bmc_up),
    "bmc-bad-credentials": (bmc_bad_credentials, bmc_credentials_restored),
    "prefix-cache-cliff": (prefix_cache_cliff, prefix_cache_restored),
}
