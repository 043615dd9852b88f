# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node's remediation history: what a watch that acts (the guardian) did to this node and why,
kept on the node so it survives a new controller, and the replace-hardware mark it carries.

The file is ``{"events": [event, ...]}``, oldest first, at most MAX_EVENTS kept; an event is
``{time, class, action, outcome, checks, detail, run}`` (docs: issue 39's contract). It is written
atomically (a temporary file in the same directory, then os.replace: a reader sees the old history or
the new one, never half of one; a link planted at the path is replaced, never written through), mode
0644, under an exclusive flock of its directory so two appends never lose one another's event.

A node whose latest ``replace_hardware`` event has no later ``cleared`` one is marked "replace
hardware" (:func:`replace_hardware_pending`): node_health fails ``guardian.replace_hardware`` on it
(:func:`replace_hardware_check`), so neither the gate nor the guardian returns it, until an operator
runs ``gpufleet release`` (an event ``cleared`` with the reason).

Runs on the managed node (Python 3.11, stdlib only).
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import json
import os
import re
import stat
import tempfile

from ansible_collections.gpufleet.node.plugins.module_utils.core.results import check

DEFAULT_PATH = "/var/lib/gpufleet/remediation-history.json"
# The newest events kept: two years of a node remediated weekly, ~60 KB.
MAX_EVENTS = 200
# A history of MAX_EVENTS events is ~100 KB usually, ~2.5 MB if every event named MAX_CHECKS checks; a file
# larger than this is no history.
MAX_BYTES = 8 * 1024 * 1024
ACTIONS = ("quarantine", "gpu_reset", "reboot", "gate_passed", "gate_failed", "replace_hardware", "cleared")
OUTCOMES = ("ok", "failed")
KEYS = ("time", "class", "action", "outcome", "checks", "detail", "run")
# A failure class (quarantine.UNSAFE's names: gpu_lost, row_remap, xid, ...).
_CLASS = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
MAX_DETAIL = 500
# the failed checks of a quarantine: a 16-GPU node with every GPU failing ten checks names 161
MAX_CHECKS = 256
MAX_TEXT = 200
FILE_MODE = 0o644
CHECK = "guardian.replace_hardware"
# The options of the modules that judge CHECK (node_health, watch; doc fragment remediation_history).
OPTIONS_SPEC = {
    "history_path": {"type": "path", "default": DEFAULT_PATH},
    "node_name": {"type": "str", "default": ""},
}
NO_MARK = "no replace-hardware mark"


class HistoryError(Exception):
    """The history could not be read or written: the message names the file and why."""


def now_z():
    """The time now as the history writes it: ISO 8601, UTC, whole seconds, "Z"."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _printable(text):
    return all(c.isprintable() for c in text)


def event_errors(event, where):
    """What is wrong with one event (``where`` names it: "events[0]"): a list of messages."""
    if not isinstance(event, dict):
        return ["%s must be an object, got %s" % (where, type(event).__name__)]
    errors = []
    unknown = sorted(str(k) for k in event if k not in KEYS)
    if unknown:
        errors.append("%s: unknown key(s) %s (known: %s)" % (where, ", ".join(unknown), ", ".join(KEYS)))
    klass = event.get("class")
    if not isinstance(klass, str) or not _CLASS.match(klass):
        errors.append(
            "%s.class must be a failure class (lowercase letters, digits, _; 1..64), got %r" % (where, klass)
        )
    if event.get("action") not in ACTIONS:
        errors.append(
            "%s.action must be one of %s, got %r" % (where, ", ".join(ACTIONS), event.get("action"))
        )
    if event.get("outcome") not in OUTCOMES:
        errors.append(
            "%s.outcome must be one of %s, got %r" % (where, ", ".join(OUTCOMES), event.get("outcome"))
        )
    when = event.get("time")
    if when is not None and not (isinstance(when, str) and _TIME.match(when)):
        errors.append("%s.time must be an ISO UTC time like 2026-12-06T20:31:05Z, got %r" % (where, when))
    checks = event.get("checks", [])
    if not isinstance(checks, list) or len(checks) > MAX_CHECKS:
        errors.append("%s.checks must be a list of at most %d check names" % (where, MAX_CHECKS))
    elif not all(isinstance(c, str) and 0 < len(c) <= MAX_TEXT and _printable(c) for c in checks):
        errors.append(
            "%s.checks: each must be a check name of 1..%d printable characters" % (where, MAX_TEXT)
        )
    detail = event.get("detail", "")
    if not isinstance(detail, str) or len(detail) > MAX_DETAIL:
        errors.append("%s.detail must be text of at most %d characters" % (where, MAX_DETAIL))
    run = event.get("run", "")
    if not isinstance(run, str) or len(run) > MAX_TEXT or not _printable(run):
        errors.append("%s.run must be printable text of at most %d characters" % (where, MAX_TEXT))
    return errors


def _stored(event):
    """An event as the file keeps it: every key, the detail on one line of printable characters."""
    detail = " ".join(str(event.get("detail") or "").split())
    return {
        "time": event["time"],
        "class": event["class"],
        "action": event["action"],
        "outcome": event["outcome"],
        "checks": list(event.get("checks") or []),
        "detail": "".join(c if c.isprintable() else "?" for c in detail),
        "run": event.get("run") or "",
    }


def parse(text, path):
    """The events of a history file's text; HistoryError naming ``path`` when it is not one."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise HistoryError("%s is not JSON (%s)" % (path, exc)) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("events"), list):
        raise HistoryError('%s is not a remediation history ({"events": [...]})' % path)
    errors = []
    for i, event in enumerate(doc["events"]):
        found = event_errors(event, "events[%d]" % i)
        if not found and event.get("time") is None:
            found = ["events[%d] has no time" % i]
        errors.extend(found)
    if errors:
        raise HistoryError(
            "%s is not a remediation history: %s%s"
            % (path, "; ".join(errors[:3]), " (+%d more)" % (len(errors) - 3) if len(errors) > 3 else "")
        )
    return [_stored(e) for e in doc["events"]]


def read(path=DEFAULT_PATH):
    """The node's events, oldest first: [] when the file is missing; HistoryError when it is not a
    regular file, cannot be read, is larger than MAX_BYTES or is not a history. Opened without
    following a link and without waiting (a FIFO is never read), so a watch never hangs on it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise HistoryError("%s cannot be read: %s" % (path, exc.strerror or exc)) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise HistoryError("%s is not a regular file" % path)
        if info.st_size > MAX_BYTES:
            raise HistoryError("%s is %d bytes, more than a history's %d" % (path, info.st_size, MAX_BYTES))
        chunks, size = [], 0
        while size <= MAX_BYTES:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise HistoryError("%s cannot be read: %s" % (path, exc.strerror or exc)) from None
    finally:
        os.close(fd)
    if size > MAX_BYTES:
        raise HistoryError("%s is more than a history's %d bytes" % (path, MAX_BYTES))
    try:
        text = b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HistoryError("%s is not UTF-8 text (%s)" % (path, exc)) from None
    return parse(text, path)


def new_events(events, run="", when=None):
    """``events`` ready to append: each validated (ValueError listing every fault at once), its time
    ``when`` (default: now) where it has none, its run ``run`` where it names none."""
    if not isinstance(events, list) or not events:
        raise ValueError("events must be a non-empty list of events")
    errors = []
    for i, event in enumerate(events):
        errors.extend(event_errors(event, "events[%d]" % i))
    if run and (len(run) > MAX_TEXT or not _printable(run)):
        errors.append("run must be printable text of at most %d characters" % MAX_TEXT)
    if errors:
        raise ValueError("; ".join(errors))
    stamp = when or now_z()
    return [_stored(dict(e, time=e.get("time") or stamp, run=e.get("run") or run or "")) for e in events]


def write(path, events):
    """``events`` (the newest MAX_EVENTS) as the history at ``path``: a temporary file in its
    directory, mode 0644, flushed, then renamed over it. HistoryError naming the path."""
    directory = os.path.dirname(os.path.abspath(path))
    text = json.dumps({"events": events[-MAX_EVENTS:]}, indent=1, sort_keys=True) + "\n"
    temp = None
    try:
        fd, temp = tempfile.mkstemp(dir=directory, prefix=".remediation-history.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, FILE_MODE)
        os.replace(temp, path)
        temp = None
    except OSError as exc:
        raise HistoryError("%s cannot be written: %s" % (path, exc.strerror or exc)) from None
    finally:
        if temp is not None:
            with contextlib.suppress(OSError):
                os.unlink(temp)


def append(path, events, run="", check_mode=False, when=None):
    """The history after appending ``events`` (validated: ValueError; new_events) to the one at
    ``path`` (HistoryError when it cannot be read or written). Its directory is made (0755) when
    missing and locked while the file is read and replaced; in check mode nothing is written and
    the history it would be is returned."""
    added = new_events(events, run, when)
    if check_mode:
        return (read(path) + added)[-MAX_EVENTS:]
    directory = os.path.dirname(os.path.abspath(path))
    try:
        if not os.path.isdir(directory):
            os.makedirs(directory, 0o755)
        lock = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError as exc:
        raise HistoryError("%s cannot be written: %s" % (path, exc.strerror or exc)) from None
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        history = (read(path) + added)[-MAX_EVENTS:]
        write(path, history)
        return history
    finally:
        os.close(lock)


def replace_hardware_pending(events):
    """The latest ``replace_hardware`` event when no ``cleared`` event follows it, else None."""
    pending = None
    for event in events or []:
        if event.get("action") == "replace_hardware":
            pending = event
        elif event.get("action") == "cleared":
            pending = None
    return pending


def reading(path=DEFAULT_PATH, node=""):
    """The history as node_health judges it: ``{path, node, events, error}`` (events None and the
    error's text when it could not be read)."""
    try:
        return {"path": path, "node": node, "events": read(path), "error": None}
    except HistoryError as exc:
        return {"path": path, "node": node, "events": None, "error": str(exc)}


def replace_hardware_check(history):
    """``guardian.replace_hardware`` of a :func:`reading`: fails while the node is marked "replace
    hardware" (its class the value), and closed when the history could not be read (whether it is
    marked is unknown)."""
    node = history.get("node") or "<node>"
    release = 'gpufleet release --limit %s --reason "..."' % node
    if history.get("error"):
        return check(
            CHECK,
            False,
            "unread",
            NO_MARK,
            "",
            "the remediation history could not be read: %s; whether the node is marked to replace hardware "
            "is unknown (fail closed): repair or move the file aside (it is the node's record of "
            "quarantines and remediations), then run again" % history["error"],
        )
    pending = replace_hardware_pending(history.get("events") or [])
    if pending is None:
        return check(
            CHECK,
            True,
            None,
            NO_MARK,
            "",
            "no replace-hardware mark (%d events in %s)"
            % (len(history.get("events") or []), history["path"]),
        )
    detail = (": %s" % pending["detail"]) if pending.get("detail") else ""
    return check(
        CHECK,
        False,
        pending["class"],
        NO_MARK,
        "",
        "replace hardware: %s marked at %s%s; the node is never returned or remediated automatically: "
        "after the repair, %s clears the mark" % (pending["class"], pending["time"], detail, release),
    )
