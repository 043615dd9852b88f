# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The run lock on the node: one changing run (provision, the gate, drift --fix) at a time, whichever
controller, account or AWX job starts it.

The lock is a JSON record of its holder - ``{id, user, command, controller, pid, started}`` - put in
place with link(2), which fails when the file exists: two runs that race for a node cannot both get
it, and a reader never sees half a record. A run holding the node takes it again (its later plays);
another run's record is refused, naming it, unless the operator breaks it (``break_lock``: that run
is gone). A file that is not a holder's record (no gpufleet wrote it so) holds nothing: it is moved
aside, named, and the lock taken.

Runs on the managed node (Python 3.11, stdlib only).
"""

from __future__ import annotations

import json
import os
import tempfile

# Under /run: a reboot ends every run that held the node, and the lock with it.
DEFAULT_PATH = "/run/lock/gpufleet-run.json"
HOLDER_KEYS = ("id", "user", "command", "controller", "pid", "started")


class Held(Exception):
    """Another run holds the node; the message names it and what to do."""

    def __init__(self, message, holder):
        super().__init__(message)
        self.holder = holder


def describe(holder):
    """'gpufleet drift --fix by alice on laptop1 (pid 4242, started 2026-...)'."""
    return "%s by %s on %s (pid %s, started %s)" % (
        holder.get("command"),
        holder.get("user"),
        holder.get("controller"),
        holder.get("pid"),
        holder.get("started"),
    )


def read(path):
    """``(holder, problem)``: the record at ``path`` (None when there is none), or the problem that
    makes its content no holder's record."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read(65536)
    except FileNotFoundError:
        return None, None
    try:
        holder = json.loads(text)
    except ValueError:
        return None, "not JSON (%r)" % text[:80]
    if not isinstance(holder, dict) or any(not isinstance(holder.get(k), (str, int)) for k in HOLDER_KEYS):
        return None, "not a holder's record (%s expected, got %r)" % (", ".join(HOLDER_KEYS), text[:120])
    return holder, None


def _aside(path, why):
    """Moves the file at ``path`` aside (atomic: of two runs, one moves it); the new name, or None when
    another run moved it first."""
    target = "%s.%s-%d" % (path, why, os.getpid())
    try:
        os.rename(path, target)
    except FileNotFoundError:
        return None
    return target


def _place(path, holder):
    """The record in place if no file is there (True), else False; never overwrites."""
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, mode=0o755, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".gpufleet-run-")
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


def take(path, holder, break_lock=False):
    """Holds the node for ``holder``. Returns ``{changed, notes}`` (notes: a record broken or a stray
    file moved aside); raises Held naming the run that holds it."""
    notes = []
    for _attempt in range(5):
        if _place(path, holder):
            return {"changed": True, "notes": notes}
        current, problem = read(path)
        if problem:
            moved = _aside(path, "stray")
            if moved:
                notes.append("%s was %s; moved to %s, the lock taken" % (path, problem, moved))
            continue
        if current is None:
            continue  # released between our link and our read
        if str(current["id"]) == str(holder["id"]):
            return {"changed": False, "notes": notes}
        if not break_lock:
            raise Held(
                "held by %s: another run is changing it (lock %s). Wait for it to finish; if that run is "
                "gone (killed, its controller down), run again with --break-lock (gpufleet_break_lock: true)"
                % (describe(current), path),
                current,
            )
        moved = _aside(path, "broken")
        if moved:
            notes.append(
                "broke the lock of %s (--break-lock), its record kept in %s" % (describe(current), moved)
            )
    raise Held("could not take %s: other runs keep taking it" % path, {})


def release(path, holder_id):
    """Releases the node if ``holder_id`` holds it: ``{changed, holder}`` (holder: who holds it instead)."""
    current, problem = read(path)
    if problem or current is None or str(current["id"]) != str(holder_id):
        return {"changed": False, "holder": current}
    moved = _aside(path, "released")
    if moved:
        os.unlink(moved)
    return {"changed": bool(moved), "holder": None}
