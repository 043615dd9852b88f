# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The run lock on the node: one changing run (provision, the gate, drift --fix) at a time, whichever
controller, account or AWX job starts it.

The lock is a JSON record of its holder - ``{id, user, command, controller, pid, started}`` - put in
place with link(2), which fails when the file exists: two runs that race for a node cannot both get
it, and a reader never sees half a record. A run holding the node takes it again (its later plays);
another run's record is refused, naming it, unless the operator breaks it (``break_lock``: that run
is gone).

The record lives where only root writes (DEFAULT_PATH's directory: every directory up to it a real
directory owned by root that no one else may write to, else refused), and nothing found there is
trusted: it is looked at without following a link or opening anything but a regular, root-owned,
singly linked file of a record's size, and its content is never quoted. Anything else at the path (a
link, a FIFO, a directory, a file that is no holder's record) is refused, named by what it is, and
moved aside only with ``break_lock``. No step waits: a FIFO or a device is never opened.

Runs on the managed node (Python 3.11, stdlib only).
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
import time

# Under /run: a reboot ends every run that held the node, and the lock with it. /run/gpufleet is
# also where the gate writes its markers (mode 0755, the mode this module creates it with).
DEFAULT_PATH = "/run/gpufleet/run-lock.json"
# Where gpufleet before 0.9 kept it (world-writable /run/lock): an older controller's run still
# holding a node there is honoured (refused, broken with break_lock); nothing else there is read.
LEGACY_PATH = "/run/lock/gpufleet-run.json"
HOLDER_KEYS = ("id", "user", "command", "controller", "pid", "started")
# A record is ~200 bytes; a field longer than this is no holder's.
MAX_RECORD_BYTES = 4096
MAX_FIELD_CHARS = 256
# link(2) lost to another run this many times in a row: give up, named (no wait, no sleep).
ATTEMPTS = 5

_KINDS = (
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)
_BREAK = "run again with --break-lock (gpufleet_break_lock: true) to move it aside"


class Refused(Exception):
    """The node cannot be held: the message says why and what to do; ``holder`` is the run holding it
    (empty when no run is known to)."""

    def __init__(self, message, holder=None):
        super().__init__(message)
        self.holder = holder or {}


class Held(Refused):
    """Another run holds the node; the message names it and what to do."""


def _trusted_owners():
    # root; and the account the module runs as (a test's tmp dir), which on a node is root
    return {0, os.geteuid()}


def _printable(value):
    """A holder's field on one line, control characters written out (a record with any is no record:
    this is the second guard of what reaches an operator's terminal)."""
    return "".join(c if c.isprintable() else "\\u%04x" % ord(c) for c in value)


def describe(holder):
    """'gpufleet drift --fix by alice on laptop1 (pid 4242, started 2026-...)'."""
    return "%s by %s on %s (pid %s, started %s)" % tuple(
        _printable(str(holder.get(key))) for key in ("command", "user", "controller", "pid", "started")
    )


def safe_directory(directory, create=True):
    """The lock's directory as a real path, once every directory from / to it is a directory owned by
    root that no one else can write to (an ancestor may be world-writable with the sticky bit, as
    /tmp); the last is made (0755) when missing and ``create``. Raises Refused naming the first that
    is not so; None when it is missing and not ``create``."""
    directory = os.path.realpath(directory)
    parts = [part for part in directory.split("/") if part]
    paths = ["/"] + ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]
    for current in paths:
        last = current == directory
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            if not last:
                raise Refused(
                    "the node lock's directory %s cannot be made: %s is missing" % (directory, current)
                ) from None
            if not create:
                return None
            with contextlib.suppress(FileExistsError):
                os.mkdir(current, 0o755)
            info = os.lstat(current)
        problem = _unsafe_directory(info, last)
        if problem:
            raise Refused(
                "the node lock's directory %s is refused: %s is %s; only root may write where the lock "
                "is kept (fix it as root: a directory owned by root, mode 0755 or stricter)"
                % (directory, current, problem)
            )
    return directory


def _unsafe_directory(info, last):
    if not stat.S_ISDIR(info.st_mode):
        return "not a directory (%s)" % _kind(info.st_mode)
    if info.st_uid not in _trusted_owners():
        return "owned by uid %d, not root" % info.st_uid
    others_write = info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    if others_write and (last or not info.st_mode & stat.S_ISVTX):
        return "writable by others (mode %04o)" % stat.S_IMODE(info.st_mode)
    return None


def _kind(mode):
    for test, name in _KINDS:
        if test(mode):
            return name
    return "a regular file" if stat.S_ISREG(mode) else "a file of an unknown kind"


def inspect(path):
    """What is at ``path``, looked at without following a link or opening anything but a regular file:
    ``(holder, None)`` for a holder's record, ``(None, what)`` for anything else there (``what`` names
    it, never quoting its content), ``(None, None)`` when nothing is."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None, None
    if not stat.S_ISREG(info.st_mode):
        return None, _kind(info.st_mode)
    if info.st_uid not in _trusted_owners():
        return None, "a file owned by uid %d, not root" % info.st_uid
    if info.st_nlink != 1:
        return None, "a file with %d hard links (another file's name)" % info.st_nlink
    if info.st_size > MAX_RECORD_BYTES:
        return None, "a file of %d bytes, larger than any lock record" % info.st_size
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
    try:
        handle = os.open(path, flags)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        # ELOOP: a link put there since the lstat; anything else: what stopped the read
        return None, "a file that could not be opened (%s)" % exc.strerror
    try:
        opened = os.fstat(handle)
        if (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino) or not stat.S_ISREG(opened.st_mode):
            return None, "a file that changed while it was read"
        data = os.read(handle, MAX_RECORD_BYTES + 1)
    finally:
        os.close(handle)
    holder = _record(data)
    if holder is None:
        return None, "a file of %d bytes that is no lock record gpufleet wrote" % len(data)
    return holder, None


def _record(data):
    """The holder in ``data``, or None when it is not a record take() wrote (its content is never
    shown: the file may be anything root left there)."""
    if len(data) > MAX_RECORD_BYTES:
        return None
    try:
        holder = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    if not isinstance(holder, dict) or set(holder) != set(HOLDER_KEYS):
        return None
    for key in HOLDER_KEYS:
        value = holder[key]
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            return None
        text = str(value)
        if not text or len(text) > MAX_FIELD_CHARS or not text.isprintable():
            return None
    return holder


def _aside(path, why):
    """Moves what is at ``path`` aside, beside it (a rename: never followed, never opened; of two runs,
    one moves it); the new name, or None when another run moved it first."""
    target = "%s.%s-%d-%d" % (path, why, os.getpid(), time.time_ns())
    try:
        os.rename(path, target)
    except FileNotFoundError:
        return None
    return target


def _place(path, holder):
    """The record in place if nothing is there (True), else False; never overwrites, never follows."""
    handle, temporary = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".gpufleet-run-")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump({k: holder[k] for k in HOLDER_KEYS}, out, sort_keys=True)
        os.chmod(temporary, 0o644)
        try:
            os.link(temporary, path)
        except FileExistsError:
            return False
        return True
    finally:
        os.unlink(temporary)


def _refuse_other(path, what):
    raise Refused(
        "the node lock %s is %s: no run is known to hold the node, and none is let in while it is "
        "there. Look at it as root; %s" % (path, what, _BREAK)
    )


def _honour_legacy(path, holder, break_lock, notes):
    """An older gpufleet's run holding the node at LEGACY_PATH: refused, or moved aside with
    ``break_lock``. Anything else there holds nothing (any local user may put anything in /run/lock):
    it is not read and left alone."""
    current, _what = inspect(path)
    if current is None or str(current["id"]) == str(holder["id"]):
        return
    if not break_lock:
        raise Held(
            "the node is held by %s: another run is changing it (the lock %s of an older gpufleet). "
            "Wait for it to finish; if that run is gone, run again with --break-lock "
            "(gpufleet_break_lock: true)" % (describe(current), path),
            current,
        )
    moved = _aside(path, "broken")
    if moved:
        notes.append(
            "broke the lock of %s (--break-lock), its record kept in %s" % (describe(current), moved)
        )


def take(path, holder, break_lock=False, legacy_path=LEGACY_PATH):
    """Holds the node for ``holder``. Returns ``{changed, notes}`` (notes: what ``break_lock`` moved
    aside); raises Held naming the run that holds it, Refused for anything else in the way."""
    if _record(json.dumps({k: holder.get(k) for k in HOLDER_KEYS}).encode("utf-8")) is None:
        raise Refused(
            "the holder %s cannot be written as a lock record: each of %s must be a string or a number "
            "of 1 to %d printable characters" % (describe(holder), ", ".join(HOLDER_KEYS), MAX_FIELD_CHARS)
        )
    directory = safe_directory(os.path.dirname(path) or ".")
    path = os.path.join(directory, os.path.basename(path))
    notes = []
    if legacy_path and os.path.realpath(legacy_path) != path:
        _honour_legacy(legacy_path, holder, break_lock, notes)
    for _attempt in range(ATTEMPTS):
        if _place(path, holder):
            return {"changed": True, "notes": notes}
        current, what = inspect(path)
        if current is None and what is None:
            continue  # released between our link and our look
        if current is not None and str(current["id"]) == str(holder["id"]):
            return {"changed": False, "notes": notes}
        if not break_lock:
            if current is None:
                _refuse_other(path, what)
            raise Held(
                "the node is held by %s: another run is changing it (lock %s). Wait for it to finish; "
                "if that run is gone (killed, its controller down), run again with --break-lock "
                "(gpufleet_break_lock: true)" % (describe(current), path),
                current,
            )
        moved = _aside(path, "broken" if current is not None else "stray")
        if moved and current is not None:
            notes.append(
                "broke the lock of %s (--break-lock), its record kept in %s" % (describe(current), moved)
            )
        elif moved:
            notes.append("%s was %s; moved to %s (--break-lock)" % (path, what, moved))
    raise Refused(
        "the node lock %s could not be taken: other runs took it first %d times in a row" % (path, ATTEMPTS)
    )


def release(path, holder_id):
    """Releases the node if ``holder_id`` holds it: ``{changed, holder}`` (holder: who holds it instead;
    null when nothing or no holder's record is there)."""
    directory = safe_directory(os.path.dirname(path) or ".", create=False)
    if directory is None:
        return {"changed": False, "holder": None}
    path = os.path.join(directory, os.path.basename(path))
    current, _what = inspect(path)
    if current is None or str(current["id"]) != str(holder_id):
        return {"changed": False, "holder": current}
    moved = _aside(path, "released")
    if moved:
        os.unlink(moved)
    return {"changed": bool(moved), "holder": None}
