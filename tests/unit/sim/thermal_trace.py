"""The figures a thermal trace shows: the real H200's (tests/fixtures/real/h200-device/) or a simulated one.

A trace is samples of (seconds since the load started, die C, HBM C, power W, SM MHz, sw_power_cap
active); the load runs from 0 to ``load_s``. Plateaus are means over the load's last third, idle the
mean before the load; a time to 90 % is from the load's start (or stop) to the first sample 90 % of
the way from where it was to where it settles.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from statistics import mean, median

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real" / "h200-device"
SW_POWER_CAP = 0x4
RISE_SHARE = 0.9


@dataclass(frozen=True)
class Sample:
    t: float
    die_c: float
    memory_c: float
    power_w: float
    sm_mhz: float
    power_capped: bool


@dataclass(frozen=True)
class Figures:
    idle_die_c: float
    plateau_die_c: float
    die_rise_90_s: float
    die_fall_90_s: float
    idle_memory_c: float
    plateau_memory_c: float
    memory_rise_90_s: float
    load_power_w: float
    load_sm_mhz: float
    power_capped_share: float


def real_trace() -> tuple[list[Sample], float]:
    """The capture's samples, timed from the load-start mark, and the load's length."""
    marks = dict(line.split() for line in (REAL / "thermal-trace-marks.txt").read_text().splitlines())
    start, stop = float(marks["load-start"]), float(marks["load-stop"])
    samples = []
    for line in (REAL / "thermal-trace-idle-load-cooldown.csv").read_text().splitlines():
        cells = [c.strip() for c in line.split(",")]
        unix, die, memory, reasons, power, sm = cells[0], cells[3], cells[4], cells[6], cells[8], cells[9]
        capped = bool(int(reasons, 16) & SW_POWER_CAP)
        samples.append(
            Sample(float(unix) - start, float(die), float(memory), float(power), float(sm), capped)
        )
    return samples, stop - start


def _time_to(samples: list[Sample], key: str, since: float, before: float, after: float) -> float:
    """Seconds from `since` to the first sample 90 % of the way from `before` to `after`."""
    goal = before + RISE_SHARE * (after - before)
    for s in samples:
        value = getattr(s, key)
        if s.t >= since and (value >= goal if after > before else value <= goal):
            return s.t - since
    return float("inf")


def figures(samples: list[Sample], load_s: float) -> Figures:
    idle = [s for s in samples if s.t < 0]
    plateau = [s for s in samples if load_s * 2 / 3 <= s.t < load_s]
    loaded = [s for s in samples if 0.1 * load_s <= s.t < load_s]  # past the first seconds' ramp
    rested = [s for s in samples if s.t >= load_s + 30]
    idle_die, idle_mem = mean(s.die_c for s in idle), mean(s.memory_c for s in idle)
    plateau_die, plateau_mem = mean(s.die_c for s in plateau), mean(s.memory_c for s in plateau)
    rested_die = mean(s.die_c for s in rested) if rested else idle_die
    return Figures(
        idle_die_c=idle_die,
        plateau_die_c=plateau_die,
        die_rise_90_s=_time_to(samples, "die_c", 0.0, idle_die, plateau_die),
        die_fall_90_s=_time_to(samples, "die_c", load_s, plateau_die, rested_die),
        idle_memory_c=idle_mem,
        plateau_memory_c=plateau_mem,
        memory_rise_90_s=_time_to(samples, "memory_c", 0.0, idle_mem, plateau_mem),
        load_power_w=median(s.power_w for s in loaded),
        load_sm_mhz=median(s.sm_mhz for s in loaded),
        power_capped_share=sum(s.power_capped for s in loaded) / len(loaded),
    )
