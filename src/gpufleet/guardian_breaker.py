"""A watch that acts (issue 39): the circuit breaker, so automation never takes out more than a configured
share of the serving fleet in a window.

Its state is one file in gpufleet's state directory (``runlock.state_dir()``, where the run locks and the
runner's private directories are): ``guardian/breaker.json``::

    {"events": [{"time": "2026-12-06T20:31:05Z", "node": "gpu-03"}, ...],   quarantines, oldest first
     "open": false, "opened": "", "opened_why": "",
     "closed_by_reason": [{"time": ..., "reason": ..., "opened": ..., "forgiven": [nodes]}, ...]}

- :func:`limit`: the smaller of guardian_breaker_max_nodes and floor(max_percent x serving nodes / 100),
  at least 1 unless max_nodes is 0;
- :func:`admit`: whether one more quarantine fits (the quarantines recorded in the window and this run's
  so far, plus this one, at most the limit); when it does not, the breaker opens and stays open until a
  person closes it (:func:`close`, ``gpufleet breaker close --reason "..."``), so that node and every
  further one is "would quarantine";
- :func:`record`: a quarantine counted. The guardian records (and saves) a node's quarantine BEFORE the
  playbook that drains it runs: a run killed in the middle has still counted every node it may have taken
  out, and the next run cannot take out as many again;
- :func:`close`: closed by a person with a reason; the quarantines counted until then are forgiven (kept
  in that close's record), else the next run would open it again at once.

A file that cannot be read is never reset silently (it is what keeps automation from draining the
fleet): :class:`BreakerError` names it and what to do. Writes replace the file whole (atomic_file);
:func:`held` serialises two gpufleet processes that read, change and save it.
"""

from __future__ import annotations

import contextlib
import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from fractions import Fraction
from pathlib import Path
from typing import Any

from gpufleet import atomic_file, preflight, runlock
from gpufleet.guardian_escalation import iso, parse_time
from gpufleet.guardian_settings import BREAKER_WINDOW_MIN, BreakerSettings

FILE = Path("guardian") / "breaker.json"
# A quarantine older than the longest window allowed no longer counts: dropped when one is recorded.
KEEP = timedelta(minutes=BREAKER_WINDOW_MIN.high)
# The closes kept (each with its reason and the quarantines it forgave).
KEEP_CLOSES = 100
REASON_MAX = 200
HELD_WAIT_S = 10.0


class BreakerError(preflight.ConfigError):
    """The breaker's state cannot be read or written (exit 2: nothing was changed)."""


@dataclass
class BreakerState:
    """The breaker as its file holds it (times as "2026-12-06T20:31:05Z")."""

    events: list[dict[str, str]] = field(default_factory=list)
    open: bool = False
    opened: str = ""
    opened_why: str = ""
    closed_by_reason: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "events": self.events,
            "open": self.open,
            "opened": self.opened,
            "opened_why": self.opened_why,
            "closed_by_reason": self.closed_by_reason,
        }


def path(state_dir: Path | None = None) -> Path:
    """The breaker's file: ``<state dir>/guardian/breaker.json``."""
    return (state_dir or runlock.state_dir()) / FILE


def _corrupt(where: Path, why: str) -> BreakerError:
    return BreakerError(
        f"the guardian's breaker state {where} cannot be read: {why}. gpufleet never resets it on its own "
        "(it counts the nodes automation took out of service): repair the file, or, having read what it "
        "holds, move it aside (no file: the breaker starts closed with nothing counted)"
    )


def _times(items: Any, where: Path, what: str, keys: tuple[str, ...]) -> list[dict[str, Any]]:
    if not isinstance(items, list):
        raise _corrupt(where, f"{what} is not a list")
    for number, item in enumerate(items):
        if not isinstance(item, dict):
            raise _corrupt(where, f"{what}[{number}] is not an object")
        if parse_time(item.get("time")) is None:
            raise _corrupt(where, f"{what}[{number}].time is {item.get('time')!r}, not a time")
        for key in keys:
            if not isinstance(item.get(key), str) or not item[key]:
                raise _corrupt(where, f"{what}[{number}].{key} is {item.get(key)!r}, not a text")
    return items


def from_dict(data: Any, where: Path) -> BreakerState:
    """A state read back, every field checked (BreakerError naming the file and the field)."""
    if not isinstance(data, dict):
        raise _corrupt(where, "not a JSON object")
    if not isinstance(data.get("open", False), bool):
        raise _corrupt(where, f"open is {data.get('open')!r}, not true or false")
    opened = data.get("opened", "")
    if not isinstance(opened, str) or (opened and parse_time(opened) is None):
        raise _corrupt(where, f"opened is {opened!r}, not a time")
    if not isinstance(data.get("opened_why", ""), str):
        raise _corrupt(where, "opened_why is not a text")
    return BreakerState(
        events=_times(data.get("events", []), where, "events", ("node",)),
        open=bool(data.get("open", False)),
        opened=opened,
        opened_why=str(data.get("opened_why", "")),
        closed_by_reason=_times(data.get("closed_by_reason", []), where, "closed_by_reason", ("reason",)),
    )


def load(where: Path | None = None) -> BreakerState:
    """The breaker's state; a closed breaker with nothing counted when there is no file yet."""
    where = where or path()
    try:
        text = where.read_text(encoding="utf-8")
    except FileNotFoundError:
        return BreakerState()
    except (OSError, UnicodeDecodeError) as exc:
        raise _corrupt(where, str(getattr(exc, "strerror", None) or exc)) from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise _corrupt(where, f"not JSON ({exc})") from None
    return from_dict(data, where)


def save(state: BreakerState, where: Path | None = None) -> None:
    """The state written whole (a new file renamed over the old one: a run killed while writing leaves
    the old state, never half a file)."""
    where = where or path()
    try:
        where.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        atomic_file.replace(where, json.dumps(state.to_dict(), indent=1) + "\n")
    except OSError as exc:
        raise BreakerError(
            f"cannot write the guardian's breaker state {where}: {exc.strerror or exc}"
        ) from None


def held(where: Path | None = None) -> contextlib.AbstractContextManager[None]:
    """An flock beside the state file (``breaker.json.lock``) while a process reads, changes and saves
    it: two guardians (the timer's and a person's) cannot both count the same last free place."""
    where = where or path()
    where.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    guard = where.with_name(where.name + ".lock")
    return runlock.flock_guard(guard, HELD_WAIT_S, BreakerError, str(guard), ": try again")


def limit(settings: BreakerSettings, serving_nodes: int) -> int:
    """How many nodes automation may take out within the window: the smaller of max_nodes and
    floor(max_percent x serving_nodes / 100), but at least 1 unless max_nodes is 0 (then none)."""
    if settings.max_nodes <= 0:
        return 0
    share = math.floor(Fraction(str(settings.max_percent)) * max(serving_nodes, 0) / 100)
    return min(settings.max_nodes, max(share, 1))


def in_window(state: BreakerState, now: datetime, window: timedelta) -> list[dict[str, str]]:
    """The quarantines counted within ``window`` before ``now`` (since the breaker's last close)."""
    start = now - window
    return [e for e in state.events if (parse_time(e.get("time")) or now) >= start]


def used(state: BreakerState, now: datetime, window: timedelta) -> int:
    """How many quarantines are counted within ``window`` before ``now``."""
    return len(in_window(state, now, window))


def admit(state: BreakerState, node: str, now: datetime, limit: int, window: timedelta) -> bool:
    """Whether quarantining ``node`` now stays within ``limit`` (with those recorded in ``window``).
    Refused when the breaker is open; refused and the breaker opened (``state`` changed) when it would
    pass the limit. Admitting records nothing: :func:`record` does once the node is chosen."""
    if state.open:
        return False
    counted = used(state, now, window)
    if counted + 1 > limit:
        state.open = True
        state.opened = iso(now)
        state.opened_why = (
            f"{node} would have been the {_nth(counted + 1)} node quarantined within "
            f"{_minutes(window)} (limit {limit})"
        )
        return False
    return True


def record(state: BreakerState, node: str, now: datetime) -> None:
    """A quarantine of ``node`` counted (quarantines past the longest window dropped)."""
    oldest = now - KEEP
    state.events = [e for e in state.events if (parse_time(e.get("time")) or now) >= oldest]
    state.events.append({"time": iso(now), "node": node})


def check_reason(reason: str) -> str:
    """A close's reason: 1..200 printable characters (ValueError naming the range otherwise)."""
    text = reason.strip()
    if not 1 <= len(text) <= REASON_MAX or not text.isprintable():
        raise ValueError(
            f"--reason must be 1..{REASON_MAX} printable characters (one line), got {len(text)} characters"
            + ("" if text.isprintable() else " with a control character")
        )
    return text


def close(state: BreakerState, reason: str, now: datetime) -> bool:
    """The breaker closed by a person: ``reason`` recorded with the time and when it had opened, the
    quarantines counted so far forgiven. Whether it was open."""
    text = check_reason(reason)
    was_open = state.open
    state.closed_by_reason.append(
        {
            "time": iso(now),
            "reason": text,
            "opened": state.opened,
            "was_open": was_open,
            "forgiven": [e.get("node", "") for e in state.events],
        }
    )
    state.closed_by_reason = state.closed_by_reason[-KEEP_CLOSES:]
    state.events = []
    state.open, state.opened, state.opened_why = False, "", ""
    return was_open


def summary(state: BreakerState, settings: BreakerSettings, limit: int, now: datetime) -> dict[str, Any]:
    """Report.guardian's ``breaker``: ``{open, limit, used, window_min, opened}``."""
    return {
        "open": state.open,
        "limit": limit,
        "used": used(state, now, timedelta(minutes=settings.window_min)),
        "window_min": settings.window_min,
        "opened": state.opened,
    }


def _nth(number: int) -> str:
    suffix = "th" if 10 <= number % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return f"{number}{suffix}"


def _minutes(window: timedelta) -> str:
    return f"{window.total_seconds() / 60:g} min"
