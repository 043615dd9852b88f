"""Changing runs (provision, gate, drift --fix) on the same hosts never interleave.

Each changing run records itself - pid, command, start time, hosts - in the controller's state
directory while it runs; a second run whose hosts overlap is refused, naming the first. A record
whose process is gone (killed, crashed, the machine rebooted) is stale and is removed by the next
run, so a lock never outlives its holder. The records are read and written under an flock, so two
runs starting at the same instant cannot both pass.

This lock sees one controller's runs; the lock every controller sees is on the node itself
(playbooks/tasks/hold_node.yml, module_utils/node/run_lock.py), taken by the playbooks.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any


class Busy(Exception):
    """Another changing run holds some of these hosts."""


def state_dir() -> Path:
    """$GPUFLEET_STATE_DIR, else $XDG_STATE_HOME/gpufleet, else ~/.local/state/gpufleet."""
    if os.environ.get("GPUFLEET_STATE_DIR"):
        return Path(os.environ["GPUFLEET_STATE_DIR"])
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "gpufleet"


def process_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat), or None when
    there is no such process; a reused pid has another start time."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


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


def _records(runs: Path) -> Iterator[tuple[Path, dict[str, Any]]]:
    """The records of the runs; one that is not a record hold() wrote (cut short when its writer died,
    written by hand or by another version) holds nothing: it is removed, and said so on stderr."""
    for path in sorted(runs.glob("*.json")):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            record = None
        if _well_formed(record):
            yield path, record
            continue
        path.unlink(missing_ok=True)
        print(f"gpufleet: removed {path}: not a run lock record (it held nothing)", file=sys.stderr)


@contextlib.contextmanager
def hold(command: str, hosts: dict[str, str], directory: Path | None = None) -> Iterator[None]:
    """Holds ``hosts`` ({address: inventory name}: the same machine may have other names in other
    inventories) for ``command`` while the block runs; Busy names the run that holds any of them."""
    runs = (directory or state_dir()) / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    mine = runs / f"{os.getpid()}.json"
    with open(runs / ".lock", "w") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)
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
        mine.write_text(json.dumps(record))
    try:
        yield
    finally:
        mine.unlink(missing_ok=True)
