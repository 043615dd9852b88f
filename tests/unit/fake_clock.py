"""A clock no test waits for: reading it gives ``now``, sleeping on it only moves ``now``.

Shared by the burn-in's loop (tests/unit/module_utils/thermal/test_burn_in.py and
tests/unit/sim/test_thermal_gate_outcomes.py pass ``clock=fake, sleep=fake.sleep``) and the fleet's
start wait (tests/unit/sim/test_fleet_start_wait.py sets it as fleet.py's ``time``: ``monotonic``
and ``sleep``).
"""

from __future__ import annotations


class FakeClock:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
