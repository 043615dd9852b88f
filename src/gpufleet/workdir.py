"""The private directory of one ansible-runner run, where nothing outlives the run for long.

ansible-runner writes the controller's whole environment into ``artifacts/<id>/command``; a run killed
with SIGKILL cannot remove it. So each run's directory is under gpufleet's state directory (0700, not
/tmp), named by its process (pid and start time); the environment copy is removed as soon as the
playbook has started (its first event), and every run removes the directories of runs whose process
is gone.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from gpufleet import runlock

# ansible-playbook serves its workers over a unix socket under the temp dir (multiprocessing's
# "<tmp>/pymp-XXXXXXXX/listener-XXXXXXXX"); a socket path holds at most 107 bytes (sun_path).
SOCKET_PATH_MAX = 107
_LISTENER_SUFFIX = len("/pymp-XXXXXXXX/listener-XXXXXXXX")


class TempDirTooLong(ValueError):
    """The temp dir is too long for ansible-playbook's socket under it."""


def check_temp_dir() -> None:
    """Refuses a temp dir whose socket path would not fit: ansible-playbook would stop at its start with
    "Local RPC server did not start", a message that names neither the cause nor the setting."""
    temp = tempfile.gettempdir()
    room = SOCKET_PATH_MAX - _LISTENER_SUFFIX
    if len(os.fsencode(temp)) > room:
        raise TempDirTooLong(
            f"the temp dir {temp} (TMPDIR) is {len(os.fsencode(temp))} bytes long: ansible-playbook's "
            f"socket under it would pass the {SOCKET_PATH_MAX}-byte limit of a unix socket path; set "
            f"TMPDIR to a directory of at most {room} bytes (e.g. /tmp)"
        )


def _owner_gone(entry: Path) -> bool:
    """Whether the run that made ``entry`` (named '<pid>-<start>-...') no longer runs."""
    pid, _, rest = entry.name.partition("-")
    start = rest.partition("-")[0]
    if not pid.isdigit():
        return False
    return runlock.process_start(int(pid)) != start


def sweep(base: Path) -> list[Path]:
    """Removes the directories of runs whose process is gone; returns what it removed."""
    removed = []
    for entry in sorted(base.iterdir()):
        if entry.is_dir() and _owner_gone(entry):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


@contextlib.contextmanager
def private_dir(base: Path | None = None) -> Iterator[Path]:
    """A fresh private directory for one run, removed when the run ends."""
    base = base or runlock.state_dir() / "runner"
    base.mkdir(parents=True, exist_ok=True)
    os.chmod(base, 0o700)
    sweep(base)
    prefix = f"{os.getpid()}-{runlock.process_start(os.getpid())}-"
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def forget_environment(private: Path) -> None:
    """Removes ansible-runner's copy of the environment (artifacts/*/command) once the playbook runs."""
    for command in private.glob("artifacts/*/command"):
        command.unlink(missing_ok=True)
