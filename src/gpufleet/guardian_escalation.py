"""A watch that acts (issue 39): when a node is no longer remediated but marked "replace hardware".

Each node keeps its remediation history on the node (module gpufleet.node.remediation_history, oldest
event first): ``{"time": "2026-12-06T20:31:05Z", "class": "<quarantine.UNSAFE name>", "action":
"quarantine" | "gpu_reset" | "reboot" | "gate_passed" | "gate_failed" | "replace_hardware" | "cleared",
"outcome": "ok" | "failed", "checks": [...], "detail": "...", "run": "<run id>"}``. From it and the node's
failed checks:

- the same class remediated ``guardian_escalate_after`` times (a gpu_reset or a reboot event, whatever its
  outcome: an attempt that failed is an attempt) within ``guardian_escalate_window_h`` -> replace hardware.
  The defaults, 2 within 168 h (7 days), are NVIDIA NVSentinel's repeat-offender escalation (two
  remediations in a 7-day window); gpud likewise marks a node for hardware inspection after two reboots;
- straight to replace hardware, whatever the count: a failed row remap (``health.row_remap_failure``:
  NVIDIA's RMA policy), Xid 64 (the row remapper could not record a remap: its reserved rows are spent),
  and a GPU lost (class gpu_lost) a second time within the window (an earlier quarantine of that class).

A node whose latest ``replace_hardware`` event has no later ``cleared`` (``gpufleet release``) stays
"replace hardware": never remediated again (:func:`pending_replace`).

Pure functions: times are aware datetimes (UTC); an event whose time cannot be read counts as within
the window (a history that cannot be dated must not hide a repeat offender).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from gpufleet import quarantine
from gpufleet.guardian_settings import GuardianSettings

TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
REMEDIATION_ACTIONS = ("gpu_reset", "reboot")
REPLACE = "replace_hardware"
CLEARED = "cleared"
ROW_REMAP_FAILURE = "health.row_remap_failure"
XID = "health.xid"
# Xid 64: "ECC page retirement or row remapper recording failure" (NVIDIA's Xid catalog): the GPU could
# not record a remap, so the next reset cannot repair the row either.
XID_REPLACE = 64
GPU_LOST = "gpu_lost"
# node_health's health.xid message: "GPU <bus> (<uuid>): Xid 64, 79 in the kernel log since boot (...)"
_XID_LIST = re.compile(r"\bXid ([0-9]+(?:, [0-9]+)*) in the kernel log")


@dataclass(frozen=True)
class Escalation:
    """Whether a node goes to "replace hardware" instead of a remediation, and why (one line)."""

    replace: bool
    why: str


def iso(moment: datetime) -> str:
    """A time as the history and the reports write it (UTC, seconds, Z)."""
    return moment.astimezone(UTC).strftime(TIME_FORMAT)


def parse_time(text: Any) -> datetime | None:
    """An event's time ("2026-12-06T20:31:05Z", or any ISO 8601 time with an offset), None when it
    cannot be read."""
    if not isinstance(text, str) or not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _within(event: Mapping[str, Any], now: datetime, window: timedelta) -> bool:
    moment = parse_time(event.get("time"))
    return moment is None or moment >= now - window


def _event_list(events: Iterable[Any]) -> list[Mapping[str, Any]]:
    return [e for e in events if isinstance(e, Mapping)]


def remediations_in_window(
    events: Iterable[Any], cls: str, now: datetime, window: timedelta
) -> list[Mapping[str, Any]]:
    """The remediations (gpu_reset and reboot events, any outcome) of class ``cls`` within ``window``
    before ``now``, oldest first. Its len() is the count escalation compares."""
    return [
        e
        for e in _event_list(events)
        if e.get("class") == cls and e.get("action") in REMEDIATION_ACTIONS and _within(e, now, window)
    ]


def xid_numbers(check: Mapping[str, Any]) -> set[int]:
    """The Xid numbers a health.xid check reports: its value (the worst Xid, node_health.xid_checks; a
    number, digits, or a list of them) and the list its message gives ("Xid 64, 79 in the kernel log")."""
    found: set[int] = set()
    value = check.get("value")
    values = value if isinstance(value, list | tuple) else [value]
    for item in values:
        if isinstance(item, bool):
            continue
        if isinstance(item, int):
            found.add(item)
        elif isinstance(item, str):
            found.update(int(n) for n in re.findall(r"\b[0-9]+\b", item))
    for listed in _XID_LIST.findall(str(check.get("message") or "")):
        found.update(int(n) for n in listed.split(", "))
    return found


def _failed(checks: Iterable[Any]) -> list[Mapping[str, Any]]:
    return [c for c in checks if isinstance(c, Mapping) and not c.get("ok", True)]


def straight_to_replace(checks: Iterable[Any]) -> str:
    """Why the failed ``checks`` send the node straight to replace hardware, "" when they do not: a
    failed row remap, Xid 64."""
    for check in _failed(checks):
        name = str(check.get("name", ""))
        if quarantine.family(name) == ROW_REMAP_FAILURE:
            return f"{name} failed: a GPU memory row could not be remapped (NVIDIA: RMA), replace hardware"
        if quarantine.family(name) == XID and XID_REPLACE in xid_numbers(check):
            return (
                f"{name} reports Xid {XID_REPLACE}: the row remapper could not record a remap (its reserved "
                "rows are spent), replace hardware"
            )
    return ""


def escalate(
    events: Iterable[Any],
    cls: str,
    failed_checks: Iterable[Any],
    now: datetime,
    settings: GuardianSettings,
) -> Escalation:
    """Whether a node failing in class ``cls`` (its ``failed_checks``: the node's, of any class) goes to
    replace hardware given its history ``events``: a failed row remap or Xid 64 at once, a GPU lost
    again within the window, or ``settings.escalate_after`` remediations of ``cls`` within
    ``settings.escalate_window_h``."""
    window = timedelta(hours=settings.escalate_window_h)
    hours = f"{settings.escalate_window_h} h"
    events = _event_list(events)
    at_once = straight_to_replace(failed_checks)
    if at_once:
        return Escalation(True, at_once)
    if cls == GPU_LOST:
        before = [
            e
            for e in events
            if e.get("class") == GPU_LOST and e.get("action") == "quarantine" and _within(e, now, window)
        ]
        if before:
            return Escalation(
                True,
                f"a GPU lost a second time within {hours} (quarantined for it at {before[-1].get('time')}): "
                "replace hardware",
            )
    done = remediations_in_window(events, cls, now, window)
    count = f"{len(done)} remediation{'s' if len(done) != 1 else ''} of {cls} within {hours}"
    if len(done) >= settings.escalate_after:
        shown = ", ".join(f"{e.get('action')} {e.get('time')}" for e in done[-3:])
        return Escalation(
            True,
            f"{count} ({shown}; guardian_escalate_after {settings.escalate_after}): replace hardware",
        )
    return Escalation(False, f"{count}; replace hardware after {settings.escalate_after}")


def escalate_node(
    events: Iterable[Any],
    classes: Mapping[str, Sequence[str]],
    failed_checks: Iterable[Any],
    now: datetime,
    settings: GuardianSettings,
) -> Escalation:
    """:func:`escalate` over a node's unsafe classes (quarantine.unsafe_classes' result, in its order):
    the first that goes to replace hardware, else the first class's answer (no class: no escalation)."""
    events = _event_list(events)
    failed = _failed(failed_checks)
    answers = [escalate(events, cls, failed, now, settings) for cls in classes]
    return next((a for a in answers if a.replace), answers[0] if answers else Escalation(False, ""))


def pending_replace(events: Iterable[Any]) -> Mapping[str, Any] | None:
    """The node's latest ``replace_hardware`` event when no ``cleared`` event follows it (the node stays
    out, never remediated again), else None. By the history's order (oldest first), not its clocks."""
    pending: Mapping[str, Any] | None = None
    for event in _event_list(events):
        if event.get("action") == REPLACE:
            pending = event
        elif event.get("action") == CLEARED:
            pending = None
    return pending
