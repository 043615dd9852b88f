"""Changing runs (provision, gate, drift --fix) on the same hosts never interleave.

Each changing run records itself - pid, command, start time, hosts - in the controller's state
directory while it runs; a second run whose hosts overlap is refused, naming the first. A record
whose process is gone (killed, crashed, the machine rebooted) is stale and is removed by the next
run, so a lock never outlives its holder. The records are read and written under an flock, so two
runs starting at the same instant cannot both pass; that wait is bounded (GUARD_WAIT_S). Nothing in
the directory is followed or trusted: a record is read only from a regular file, without following a
link or waiting on a FIFO, and the guard and this run's record are opened so (O_NOFOLLOW).

This lock sees one controller's runs; the lock every controller sees is on the node itself
(playbooks/tasks/hold_node.yml, module_utils/node/run_lock.py), taken by the playbooks.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil


class Busy(Exception):
    """Another changing run holds some of these hosts."""


# How long a run waits for another gpufleet to finish reading and writing the records (a few ms).
GUARD_WAIT_S = 30.0
# A record is ~300 bytes a host; a file larger than this is none.
MAX_RECORD_BYTES = 4 * 1024 * 1024
_NOFOLLOW = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def state_dir() -> Path:
    """$GPUFLEET_STATE_DIR, else $XDG_STATE_HOME/gpufleet, else ~/.local/state/gpufleet."""
    if os.environ.get("GPUFLEET_STATE_DIR"):
        return Path(os.environ["GPUFLEET_STATE_DIR"])
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "gpufleet"


def process_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (what /proc/PID/stat's field 22 says, read
    through psutil), or None when there is no such process; a reused pid has another start time. The
    same text as every earlier gpufleet wrote: a run lock or a private directory of a gpufleet of
    another version is still known as alive."""
    try:
        started = psutil.Process(pid).create_time()
    except (psutil.Error, ValueError):
        return None
    return str(round((started - psutil.boot_time()) * os.sysconf("SC_CLK_TCK")))


def _alive(record: dict[str, Any]) -> bool:
    started = process_start(int(record["pid"]))
    return started is not None and started == record.get("pid_start")


def _well_formed(record: Any) -> bool:
    """Whether a record has the shape hold() writes (pid, pid_start, command, started, hosts)."""
    return (
        isinstance(record, dict)
        and isinstance(record.get("pid"), int)
        and isinstance(record.get("hosts"), dict)
        and all(isinstance(record.get(k), str) for k in ("command", "started"))
    )


def _read(path: Path) -> Any:
    """A record's JSON, read from a regular file only (never through a link, never waiting on a FIFO);
    None for anything else."""
    try:
        handle = os.open(path, os.O_RDONLY | _NOFOLLOW)
    except OSError:
        return None
    try:
        info = os.fstat(handle)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_RECORD_BYTES:
            return None
        return json.loads(os.read(handle, MAX_RECORD_BYTES + 1))
    except (OSError, ValueError, RecursionError):
        return None
    finally:
        os.close(handle)


def _records(runs: Path) -> Iterator[tuple[Path, dict[str, Any]]]:
    """The records of the runs; one that is not a record hold() wrote (cut short when its writer died,
    written by hand or by another version, a link, a FIFO) holds nothing: it is removed, and said so on
    stderr (a directory is left, and said so)."""
    for path in sorted(runs.glob("*.json")):
        record = _read(path)
        if _well_formed(record):
            yield path, record
            continue
        if path.is_dir() and not path.is_symlink():
            print(f"gpufleet: ignored {path}: a directory, not a run lock record", file=sys.stderr)
            continue
        path.unlink(missing_ok=True)
        print(f"gpufleet: removed {path}: not a run lock record (it held nothing)", file=sys.stderr)


@contextlib.contextmanager
def flock_guard(
    path: Path, wait_s: float, error: type[Exception], what: str, after_wait: str
) -> Iterator[None]:
    """An exclusive flock on the regular file ``path`` (created 0600, never through a link), waited for
    ``wait_s`` at most; ``error`` names what went wrong: ``what`` is how the file is called in it, and
    ``after_wait`` ends the message when the wait ran out. The run records' guard and the guardian's
    breaker state are held with it."""
    try:
        handle = os.open(path, os.O_RDWR | os.O_CREAT | _NOFOLLOW, 0o600)
    except OSError as exc:
        raise error(f"cannot open {what}: {exc.strerror} (remove it if it is a link)") from None
    try:
        if not stat.S_ISREG(os.fstat(handle).st_mode):
            raise error(f"{what} is not a regular file: remove it")
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise error(
                        f"another gpufleet has held {path} for over {wait_s:g} s{after_wait}"
                    ) from None
                time.sleep(0.05)
        yield
    finally:
        os.close(handle)


def _guard(runs: Path) -> contextlib.AbstractContextManager[None]:
    """The flock every run takes to read and write the records, waited for GUARD_WAIT_S at most."""
    path = runs / ".lock"
    return flock_guard(
        path,
        GUARD_WAIT_S,
        Busy,
        f"the run lock's guard {path}",
        " (a run stopped while it read the run records?): try again, or find that process",
    )


def _write_record(path: Path, record: dict[str, Any]) -> None:
    """This run's record, in a file it makes (never written through a link someone left there)."""
    path.unlink(missing_ok=True)
    handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o644)
    with os.fdopen(handle, "w") as out:
        out.write(json.dumps(record))


@contextlib.contextmanager
def hold(command: str, hosts: dict[str, str], directory: Path | None = None) -> Iterator[None]:
    """Holds ``hosts`` ({address: inventory name}: the same machine may have other names in other
    inventories) for ``command`` while the block runs; Busy names the run that holds any of them."""
    runs = (directory or state_dir()) / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    mine = runs / f"{os.getpid()}.json"
    with _guard(runs):
        for path, record in _records(runs):
            if not _alive(record):
                path.unlink(missing_ok=True)
                continue
            shared = sorted(record["hosts"][address] for address in set(record["hosts"]) & set(hosts))
            if shared:
                raise Busy(
                    f"{record['command']} (pid {record['pid']}, started {record['started']}) is running on "
                    f"{', '.join(shared[:5])}{' ...' if len(shared) > 5 else ''}; wait for it to finish "
                    "(a run whose process is gone no longer counts)"
                )
        record = {
            "pid": os.getpid(),
            "pid_start": process_start(os.getpid()),
            "command": command,
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "hosts": dict(sorted(hosts.items())),
        }
        _write_record(mine, record)
    try:
        yield
    finally:
        mine.unlink(missing_ok=True)
