"""The thermal model: what coolant, flow and load do to a simulated node's GPUs.

Pure functions of the node state and a time; stdlib only (the fake nvidia-smi and the stand-in
vLLM run it inside the nodes on /usr/bin/python3, the BMC on the controller).

Model, per NVLink baseboard (one cold-plate loop each; the node's flow splits evenly):
- A GPU's die follows a first-order lag toward ``T_coolant + P * R``, where R is the die-to-coolant
  resistance at the current flow and P its power; HBM follows the same plate, its rise a share of
  the die's, and slower. The lags (DIE_TAU_S, MEMORY_TAU_S) are fitted to a real H200 trace
  (tests/fixtures/real/h200-device/) and every profile's unless its ``gpu.thermal`` names its own
  (copied into ``state["cooling"]``, as is HBM's share): the die reaches 90 % of its rise in ~2 s
  and falls as fast, HBM takes ~14 s. The die's step is linearised around its operating point
  (the slope of P * R with the die temperature), so SW thermal throttling's steep feedback does
  not make a fast die overshoot, and a step never carries the die past the temperature where its
  heating balances (where it crosses into throttling within a step): so a low-flow die under load
  settles where SW slowdown holds it, or latched in HW slowdown, instead of jumping in and out of
  it each step.
  The state keeps each die/HBM temperature at one anchor time (``thermal_t``); a read
  integrates from there to "now" with the inputs in force, so readings move with time and nobody
  has to tick the model. Whoever changes an input (load, flow, a fault) calls ``advance`` first.
- The coolant's mean temperature at the plates is ``supply + Q / (2 W)`` with Q the heat flowing
  into it (``(T_die - T_coolant) / R`` per GPU, plus the board's other heat) and W the loop's heat
  capacity flow; the return is ``supply + Q / W``. So ΔT lags the load as the dies warm up.
- Past max operating temperature (T.Limit 0) the driver lowers clocks (SW thermal slowdown); at
  the slowdown temperature hardware halves them (HW thermal slowdown, with hysteresis). Power
  follows clocks, so a throttled GPU settles near its limit, slower.
- Power cap: a loaded GPU asks for ``idle + (full_load - idle) * utilization`` at full clocks, with
  full_load the profile's ``gpu.power.full_load_w`` (the board's limit when it has none). Past the
  enforced limit the driver lowers clocks until the draw is the limit (``sw_power_cap``): a bf16
  matmul on a real H200 asks ~900 W of a 700 W limit and runs ~25 % below its maximum SM clock.
- nvidia-smi's clocks event reason counters are the time each reason was active: the same
  integration adds each step's time to the reasons active in it (``thermal.reasons_us``, anchored
  at ``thermal_t`` like the temperatures; stored reasons a test or a build set count too).
- A PDU's protection (``pdu_cap``, the pdu-cap-in-service fault) lowers the enforced power limit
  in waves; a step that straddles a wave edge is weighted by its capped share, so long steps
  never alias the wave.
- Displayed temperatures, power and clocks are the state's stored values (the GPU at idle on a
  healthy loop, as built from the profile or set by a test) plus the model's deviation from that
  idle reference, so a node at rest reads exactly what its state says.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any

from gpufleet_sim.state import State

Gpu = dict[str, Any]

# Coolant: the DMTF CDU mockup's 20 % glycol water (cp 3.974 kJ/(kg K), 1030 kg/m3), so one
# litre per minute carries 1.03 kg/60 s * 3974 J/(kg K) = 68.2 W per kelvin of temperature rise.
WATTS_PER_LPM_K = 68.2
# Share of the die-to-coolant resistance in conduction (die, TIM, plate base), which flow does not
# change; the rest is convection in the plate's channels, R ~ flow^-0.8 (Dittus-Boelter, h ~ Re^0.8).
PLATE_SHARE = 0.4
FLOW_EXPONENT = 0.8
# Lags, fitted to the real H200 trace (its die takes ~2 s to 90 % of its rise, HBM ~14 s and
# ~40 s to its plateau; tests/unit/sim/test_thermal_fit.py) and every profile's (a cold plate's
# package, not its limits: b300-16 and h100-8 keep their own temperatures and power).
DIE_TAU_S = 0.6
MEMORY_TAU_S = 6.0
# HBM's rise above the coolant, relative to the die's (its heat and the die's cross the package).
MEMORY_RISE_RATIO = 1.15
# nvidia-smi's utilization is a busy fraction over a sample window, and a batch drains after the
# last request: the reading and the heat fall off with this time constant once requests end
# (a GPU's own default; a profile may set its own, e.g. a matmul that stops at once).
UTIL_TAU_S = 3.0
# Die temperature step for the slope of the heating term in the linearised die update.
SLOPE_PROBE_C = 0.1
# How close to its balance a step that would cross it stops the die (bisection; ~12 halvings of
# a step's move, only while a die throttles).
BALANCE_TOL_C = 0.01
# Continuous batching: one in-flight request keeps the GPUs 75 % busy, each more adds 5 points.
BUSY_PCT_ONE_REQUEST = 75.0
BUSY_PCT_PER_EXTRA_REQUEST = 5.0
# SW thermal slowdown: the driver cuts clocks 25 % per kelvin past max operating (down to 30 %),
# so a GPU whose loop cannot carry its heat settles 1-2 K past the limit at ~60 % clocks (the
# reference deployment's "60 % throughput"), with the reason active all along.
SW_THERMAL_GAIN_PER_C = 0.25
SW_THERMAL_MIN_FACTOR = 0.3
# HW thermal slowdown halves clocks (NVML: "reduced by a factor of two or more") when SW cannot
# hold the die; it releases 1.5 K below the slowdown temperature, still past max operating.
HW_SLOWDOWN_FACTOR = 0.5
HW_RELEASE_C = 1.5
MIN_CLOCK_FACTOR = 0.2
# Integration: 0.5 s steps, near the die's lag: the exponential update is exact for constant
# inputs and never unstable, and a step stops at the die's balance, so the step only bounds how
# long the coolant and a decaying load are held constant (the die's 90 % time is 1.60 s at 0.5 s
# steps, 1.55 s at 0.05 s). Reads after long quiet spells stretch the step instead of taking longer.
STEP_S = 0.5
MAX_STEPS = 400
# Faults that describe how a node already was when someone looks settle for this many of the
# node's slowest lag at once.
SETTLE_LAGS = 10
MIN_FLOW_LPM = 0.1
# The reasons nvidia-smi counts (-q "Clocks Event Reasons Counters"), in the order it prints them.
COUNTED_REASONS = (
    "sw_power_cap",
    "sync_boost",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
)
US_PER_S = 1_000_000


@dataclass(frozen=True)
class GpuReading:
    """One GPU as the model has it at a time (physical values, before display offsets)."""

    die_c: float
    memory_c: float
    power_w: float
    clock_factor: float
    utilization_pct: float
    reasons: frozenset[str]
    hw_slowdown: bool
    enforced_limit_w: float
    reasons_us: dict[str, int]


@dataclass(frozen=True)
class LoopReading:
    """One baseboard's cold-plate loop, as its flow meter and temperature probes read it."""

    board: int
    flow_lpm: float
    rated_flow_lpm: float
    supply_c: float
    return_c: float
    heat_w: float

    @property
    def delta_c(self) -> float:
        return self.return_c - self.supply_c


@dataclass(frozen=True)
class _Gpu:
    board: int
    idle_w: float
    full_w: float
    cap_w: float
    capped_w: float  # the enforced limit while a PDU wave caps it
    stored: frozenset[str]  # counted reasons the state holds active whatever the model says
    max_op_c: float
    slowdown_c: float
    r_c_per_w: float
    requests: int
    load_pct: float
    load_t: float
    util_tau_s: float


# -- load -------------------------------------------------------------------------------------
def busy_pct(requests: int) -> float:
    if requests <= 0:
        return 0.0
    return min(100.0, BUSY_PCT_ONE_REQUEST + BUSY_PCT_PER_EXTRA_REQUEST * (requests - 1))


def _utilization(requests: int, pct: float, since: float, now: float, tau_s: float = UTIL_TAU_S) -> float:
    if requests > 0:
        return busy_pct(requests)
    return pct * math.exp(-max(now - since, 0.0) / tau_s)


def _util_tau(gpu: Gpu) -> float:
    return float((gpu.get("thermal") or {}).get("util_tau_s", UTIL_TAU_S))


def utilization(gpu: Gpu, now: float) -> float:
    load = gpu.get("load") or {}
    return _utilization(
        int(load.get("requests", 0)),
        float(load.get("pct", 0.0)),
        float(load.get("t", 0)),
        now,
        _util_tau(gpu),
    )


def change_load(state: State, uuids: list[str], delta: int, now: float) -> None:
    """A server starts (+1) or finishes (-1) a request on these GPUs."""
    advance(state, now)
    for gpu in state["gpus"]:
        if gpu["uuid"] not in uuids:
            continue
        load = gpu.setdefault("load", {"requests": 0, "pct": 0.0, "t": now})
        before = int(load.get("requests", 0))
        pct = utilization(gpu, now)
        after = max(before + delta, 0)
        load.update(requests=after, pct=busy_pct(after) if after else pct, t=now)


def clear_load(state: State, now: float) -> None:
    """Every process is gone (a reboot): load stops now and decays."""
    advance(state, now)
    for gpu in state["gpus"]:
        gpu["load"] = {"requests": 0, "pct": utilization(gpu, now), "t": now}


# -- the PDU's power-cap waves -------------------------------------------------------------------
def _capped_time(wave: dict[str, Any], t: float) -> float:
    """Seconds the wave has capped between its start and t."""
    periods, rest = divmod(max(t - float(wave["since"]), 0.0), float(wave["period_s"]))
    return periods * float(wave["capped_s"]) + min(rest, float(wave["capped_s"]))


def capped_share(state: State, start: float, end: float) -> float:
    """Share of [start, end] the PDU wave caps the GPUs (at start for an instant; 0 without one)."""
    wave = state.get("pdu_cap")
    if not wave:
        return 0.0
    if end <= start:
        since = start - float(wave["since"])
        return 1.0 if since >= 0 and since % float(wave["period_s"]) < float(wave["capped_s"]) else 0.0
    return (_capped_time(wave, end) - _capped_time(wave, start)) / (end - start)


def _capped_limit(state: State, power: dict[str, Any]) -> float:
    enforced = float(power["enforced_limit_w"])
    wave = state.get("pdu_cap")
    if not wave:
        return enforced
    dropped = float(power["requested_limit_w"]) - float(wave["drop_w"])
    return min(enforced, max(dropped, float(power["min_limit_w"])))


# -- parameters ---------------------------------------------------------------------------------
def _boards(state: State) -> list[int]:
    return sorted({int(gpu["nvlink_domain"]) for gpu in state["gpus"]})


def _board_flow(cooling: dict[str, Any], boards: int, key: str = "flow_lpm") -> float:
    return max(float(cooling[key]) / boards, MIN_FLOW_LPM)


def _resistance(cooling: dict[str, Any], gpu: Gpu, board_flow: float, nominal_flow: float) -> float:
    plate = float((gpu.get("thermal") or {}).get("plate_factor", 1.0))
    convection = float((nominal_flow / board_flow) ** FLOW_EXPONENT)
    return float(cooling["gpu_r_c_per_w"]) * (PLATE_SHARE * plate + (1 - PLATE_SHARE) * convection)


def _params(state: State) -> list[_Gpu]:
    cooling = state["cooling"]
    boards = _boards(state)
    flow = _board_flow(cooling, len(boards))
    nominal = _board_flow(cooling, len(boards), "nominal_flow_lpm")
    idle = float(cooling["gpu_idle_w"])
    full = cooling.get("gpu_full_load_w")
    out = []
    for gpu in state["gpus"]:
        power, temp = gpu["power"], gpu["temperature"]
        load = gpu.get("load") or {}
        out.append(
            _Gpu(
                board=boards.index(int(gpu["nvlink_domain"])),
                idle_w=idle,
                full_w=max(float(power["default_limit_w"] if full is None else full), idle),
                cap_w=float(power["enforced_limit_w"]),
                capped_w=_capped_limit(state, power),
                stored=frozenset(gpu.get("clocks_event_reasons", [])) & frozenset(COUNTED_REASONS),
                max_op_c=float(temp["max_operating_c"]),
                slowdown_c=float(temp["slowdown_c"]),
                r_c_per_w=_resistance(cooling, gpu, flow, nominal),
                requests=int(load.get("requests", 0)),
                load_pct=float(load.get("pct", 0.0)),
                load_t=float(load.get("t", 0.0)),
                util_tau_s=_util_tau(gpu),
            )
        )
    return out


def _operate(
    g: _Gpu, die_c: float, hw_latched: bool, util: float, cap_w: float | None = None
) -> tuple[float, float, set[str], bool]:
    """(power, clock factor, active reasons, HW slowdown latched) for a die temperature and load, under
    cap_w (the enforced limit; a PDU wave's lower one when given)."""
    cap_w = g.cap_w if cap_w is None else cap_w
    reasons: set[str] = set()
    factor = 1.0
    if die_c >= g.max_op_c:
        factor = max(SW_THERMAL_MIN_FACTOR, 1.0 - SW_THERMAL_GAIN_PER_C * (die_c - g.max_op_c))
        reasons.add("sw_thermal_slowdown")
    hw = die_c >= g.slowdown_c or (hw_latched and die_c > g.slowdown_c - HW_RELEASE_C)
    if hw:
        factor *= HW_SLOWDOWN_FACTOR
        reasons.add("hw_thermal_slowdown")
    dynamic = (g.full_w - g.idle_w) * util / 100.0
    power = g.idle_w + dynamic * factor
    if power > cap_w and dynamic > 0:
        factor = max((cap_w - g.idle_w) / dynamic, MIN_CLOCK_FACTOR)
        power = g.idle_w + dynamic * factor
        reasons.add("sw_power_cap")
    return power, max(factor, MIN_CLOCK_FACTOR), reasons, hw


def _step(
    g: _Gpu, die_c: float, hw_latched: bool, util: float, share: float
) -> tuple[float, bool, dict[str, float]]:
    """(mean power, HW latch, each reason's share of the step) for a step `share` capped by the PDU."""
    if share in (0.0, 1.0):  # no wave, or a step inside one phase: one operating point (cheap)
        power, _, reasons, latched = _operate(g, die_c, hw_latched, util, g.capped_w if share else g.cap_w)
        return power, latched, dict.fromkeys(reasons | g.stored, 1.0) if reasons or g.stored else {}
    power, shares = 0.0, dict.fromkeys(g.stored, 1.0)
    latched = hw_latched
    for cap, weight in ((g.capped_w, share), (g.cap_w, 1.0 - share)):
        if weight <= 0.0:
            continue
        watts, _, reasons, latched = _operate(g, die_c, hw_latched, util, cap)
        power += watts * weight
        for reason in reasons - g.stored:
            shares[reason] = shares.get(reason, 0.0) + weight
    return power, latched, shares


def _coolant(state: State, params: list[_Gpu], die: list[float]) -> list[tuple[float, float]]:
    """(mean plate coolant temperature, heat into the coolant) per board for these die temperatures."""
    cooling = state["cooling"]
    boards = len(_boards(state))
    capacity = 2.0 * _board_flow(cooling, boards) * WATTS_PER_LPM_K
    base = float(cooling["base_load_w"]) / boards
    supply = float(cooling["supply_c"])
    out = []
    for board in range(boards):
        conductance = sum(1.0 / g.r_c_per_w for g in params if g.board == board)
        weighted = sum(d / g.r_c_per_w for g, d in zip(params, die, strict=True) if g.board == board)
        mean = (supply + (base + weighted) / capacity) / (1.0 + conductance / capacity)
        out.append((mean, (mean - supply) * capacity))
    return out


Counters = list[dict[str, float]]


def _counters(state: State) -> Counters:
    return [
        {r: float((g["thermal"].get("reasons_us") or {}).get(r, 0)) for r in COUNTED_REASONS}
        for g in state["gpus"]
    ]


def _integrate(
    state: State, start: float, end: float, frozen_util_at: float | None = None
) -> tuple[list[float], list[float], list[bool], Counters]:
    params = _params(state)
    die = [float(g["thermal"]["die_c"]) for g in state["gpus"]]
    mem = [float(g["thermal"]["memory_c"]) for g in state["gpus"]]
    hw = [bool(g["thermal"].get("hw_slowdown", False)) for g in state["gpus"]]
    us = _counters(state)
    elapsed = max(end - start, 0.0)
    if elapsed <= 0.0:
        return die, mem, hw, us
    steps = min(max(math.ceil(elapsed / STEP_S), 1), MAX_STEPS)
    dt = elapsed / steps
    die_tau, mem_tau, mem_ratio = _lags(state)
    k_mem = 1.0 - math.exp(-dt / mem_tau)
    for step in range(steps):
        when = frozen_util_at if frozen_util_at is not None else start + (step + 0.5) * dt
        share = capped_share(state, start + step * dt, start + (step + 1) * dt)
        coolant = _coolant(state, params, die)
        for i, g in enumerate(params):
            util = _utilization(g.requests, g.load_pct, g.load_t, when, g.util_tau_s)
            latched = hw[i]
            power, hw[i], shares = _step(g, die[i], latched, util, share)
            for reason, part in shares.items():
                us[i][reason] += part * dt * US_PER_S
            rise = power * g.r_c_per_w
            plate = coolant[g.board][0]
            slope = _rise_slope(g, die[i], latched, util, share, rise)
            gap = plate + rise - die[i]
            moved = die[i] + _lagged_step(gap, slope, dt, die_tau)
            if max(die[i], moved) + SLOPE_PROBE_C >= g.max_op_c:  # else no throttling on the way
                moved = _stop_at_balance(g, die[i], gap, moved, plate, latched, util, share)
            die[i] = moved
            mem[i] += (plate + mem_ratio * rise - mem[i]) * k_mem
    return die, mem, hw, us


def _lags(state: State) -> tuple[float, float, float]:
    """(die lag, HBM lag, HBM's share of the die's rise) of this node's profile."""
    cooling = state["cooling"]
    return (
        float(cooling.get("die_tau_s", DIE_TAU_S)),
        float(cooling.get("memory_tau_s", MEMORY_TAU_S)),
        float(cooling.get("memory_rise_ratio", MEMORY_RISE_RATIO)),
    )


def _rise_slope(g: _Gpu, die_c: float, latched: bool, util: float, share: float, rise: float) -> float:
    """d(P * R)/d(die): negative where throttling cuts power as the die warms, else 0."""
    if util <= 0.0 or die_c + SLOPE_PROBE_C < g.max_op_c:
        return 0.0
    warmer, _, _ = _step(g, die_c + SLOPE_PROBE_C, latched, util, share)
    return min((warmer * g.r_c_per_w - rise) / SLOPE_PROBE_C, 0.0)


def _lagged_step(gap: float, slope: float, dt: float, tau: float) -> float:
    """The die's change over dt toward a target `gap` away whose own slope with the die is `slope`:
    the exact step of the linearised lag (its fixed point and shortened time constant), so a steep
    throttling feedback never overshoots. With slope 0 it is the plain exponential step."""
    gain = 1.0 - slope
    return gap / gain * (1.0 - math.exp(-dt * gain / tau))


def _stop_at_balance(
    g: _Gpu, die_c: float, gap: float, moved: float, plate: float, latched: bool, util: float, share: float
) -> float:
    """Where the die ends a step that moved it from die_c (`gap` below its target) to `moved`:
    there, unless it passed the temperature where its heating balances the plate (throttling makes
    heating fall as the die warms, so the balance is crossed only when the step straddles a change
    of slope, e.g. from no throttling into SW slowdown; called only where the die may throttle).
    A first-order lag never crosses its balance; the step stops at it instead, on its hotter side
    by at most BALANCE_TOL_C: a die whose balance is the HW slowdown trip (SW cannot hold it)
    reaches the trip and latches, and a latched die whose balance is the release, though unlatched
    it would heat past the trip again, stays latched there (a real one cycles in and out many
    times a second; a 0.5 s step would flip it every step)."""
    if abs(moved - die_c) <= BALANCE_TOL_C:
        return moved  # settled

    def pull(t: float) -> float:
        return plate + _step(g, t, latched, util, share)[0] * g.r_c_per_w - t

    if (gap > 0) == (pull(moved) > 0):
        return moved
    cool, hot = sorted((die_c, moved))  # heating pulls the die up from cool, down from hot
    while hot - cool > BALANCE_TOL_C:
        mid = (cool + hot) / 2
        cool, hot = (mid, hot) if pull(mid) > 0 else (cool, mid)
    return hot


# -- the state's anchors ------------------------------------------------------------------------
def _store(
    state: State, die: list[float], mem: list[float], hw: list[bool], us: Counters, now: float
) -> None:
    for gpu, d, m, h, u in zip(state["gpus"], die, mem, hw, us, strict=True):
        reasons_us = {r: round(value) for r, value in u.items()}
        gpu["thermal"].update(die_c=d, memory_c=m, hw_slowdown=h, reasons_us=reasons_us)
    state["thermal_t"] = now


def advance(state: State, now: float) -> None:
    """Moves the anchors to now under the inputs in force; call before changing an input."""
    start = float(state["thermal_t"])
    if now > start:
        _store(state, *_integrate(state, start, now), now)


def settle(state: State, now: float) -> None:
    """As if the inputs in force had held for minutes: a fault that was there before anyone looked.
    The reason counters keep what was observed: those minutes happened before anyone counted."""
    advance(state, now)
    settle_s = SETTLE_LAGS * max(_lags(state)[:2])
    die, mem, hw, _ = _integrate(state, now, now + settle_s, frozen_util_at=now)
    _store(state, die, mem, hw, _counters(state), now)


def _idle_plate(state: State, gpu: Gpu) -> float:
    """Mean coolant temperature at this GPU's plates with every GPU idle on the healthy loop."""
    cooling = state["cooling"]
    boards = len(_boards(state))
    members = sum(1 for g in state["gpus"] if g["nvlink_domain"] == gpu["nvlink_domain"])
    capacity = 2.0 * _board_flow(cooling, boards, "nominal_flow_lpm") * WATTS_PER_LPM_K
    heat = float(cooling["base_load_w"]) / boards + members * float(cooling["gpu_idle_w"])
    return float(cooling["design_supply_c"]) + heat / capacity


def idle_reference(state: State, gpu: Gpu) -> tuple[float, float]:
    """(die, HBM) temperatures of this GPU idle on the healthy loop: the zero of its display offset."""
    rise = float(state["cooling"]["gpu_idle_w"]) * float(state["cooling"]["gpu_r_c_per_w"])
    plate = _idle_plate(state, gpu)
    return plate + rise, plate + _lags(state)[2] * rise


def calibrate(state: State, idle_gpu_c: float, now: float, util_tau_s: float = UTIL_TAU_S) -> None:
    """Sets the die-to-coolant resistance so a healthy idle GPU reads idle_gpu_c, anchors at rest;
    util_tau_s is how fast the GPUs' utilization falls once their load ends."""
    cooling = state["cooling"]
    resistance = (idle_gpu_c - _idle_plate(state, state["gpus"][0])) / float(cooling["gpu_idle_w"])
    if resistance <= 0:
        raise ValueError(f"idle GPU temperature {idle_gpu_c} C is not above the coolant at the plates")
    cooling["gpu_r_c_per_w"] = resistance
    for gpu in state["gpus"]:
        die, mem = idle_reference(state, gpu)
        gpu["thermal"] = {
            "die_c": die,
            "memory_c": mem,
            "hw_slowdown": False,
            "plate_factor": 1.0,
            "reasons_us": dict.fromkeys(COUNTED_REASONS, 0),
            "util_tau_s": util_tau_s,
        }
        gpu["load"] = {"requests": 0, "pct": 0.0, "t": now}
    state["thermal_t"] = now


def plate_factor_for(state: State, gpu: Gpu, idle_die_c: float) -> float:
    """The conduction factor that makes this GPU idle at idle_die_c on the healthy loop."""
    base_rise = float(state["cooling"]["gpu_idle_w"]) * float(state["cooling"]["gpu_r_c_per_w"])
    wanted = (idle_die_c - _idle_plate(state, gpu)) / base_rise
    return max((wanted - (1 - PLATE_SHARE)) / PLATE_SHARE, 1.0)


# -- readings -----------------------------------------------------------------------------------
def readings(state: State, now: float) -> tuple[list[GpuReading], list[LoopReading]]:
    """Every GPU (state order) and every loop, as they are at now."""
    start = float(state["thermal_t"])
    die, mem, hw, us = _integrate(state, start, max(now, start))
    params = _params(state)
    capped = capped_share(state, now, now) > 0
    gpus = []
    for i, g in enumerate(params):
        util = _utilization(g.requests, g.load_pct, g.load_t, now, g.util_tau_s)
        cap = g.capped_w if capped else g.cap_w
        power, factor, reasons, latched = _operate(g, die[i], hw[i], util, cap)
        counted = {r: round(value) for r, value in us[i].items()}
        gpus.append(
            GpuReading(die[i], mem[i], power, factor, util, frozenset(reasons), latched, cap, counted)
        )
    cooling = state["cooling"]
    boards = _boards(state)
    flow = _board_flow(cooling, len(boards))
    rated = float(cooling["rated_flow_lpm"]) / len(boards)
    supply = float(cooling["supply_c"])
    loops = [
        LoopReading(board, flow, rated, supply, supply + heat / (flow * WATTS_PER_LPM_K), heat)
        for board, (_, heat) in zip(boards, _coolant(state, params, die), strict=True)
    ]
    return gpus, loops


def _display(state: State, gpu: Gpu, reading: GpuReading) -> None:
    die0, mem0 = idle_reference(state, gpu)
    temp, power, clocks = gpu["temperature"], gpu["power"], gpu["clocks"]
    temp["gpu_c"] = round(float(temp["gpu_c"]) + reading.die_c - die0)
    temp["memory_c"] = round(float(temp["memory_c"]) + reading.memory_c - mem0)
    power["draw_w"] = float(power["draw_w"]) + reading.power_w - float(state["cooling"]["gpu_idle_w"])
    power["enforced_limit_w"] = reading.enforced_limit_w
    gpu["thermal"]["reasons_us"] = reading.reasons_us
    for key in ("graphics_mhz", "sm_mhz"):
        clocks[key] = round(int(clocks[key]) * reading.clock_factor)
    gpu["utilization_pct"] = round(max(float(gpu.get("utilization_pct", 0)), reading.utilization_pct))
    reasons = [
        r for r in gpu.get("clocks_event_reasons", []) if r != "gpu_idle" or reading.utilization_pct < 1
    ]
    gpu["clocks_event_reasons"] = reasons + sorted(reading.reasons - set(reasons))


def live(state: State, now: float) -> State:
    """A copy of the state whose GPUs read as they are at now (what nvidia-smi prints)."""
    if "cooling" not in state:
        return state
    view = copy.deepcopy(state)
    gpus, _ = readings(state, now)
    for gpu, reading in zip(view["gpus"], gpus, strict=True):
        _display(view, gpu, reading)
    return view
