"""The run lock on the node (module_utils/node/run_lock.py): one holder at a time, taken atomically, named
when refused, broken only when asked; kept where only root writes, and nothing found at its path
followed, opened or quoted unless it is a regular root-owned record: a link, a FIFO, a directory, a
dangling link or a forged record is refused at once, named, and moved aside by break_lock."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.node import run_lock

SECRET = "root-only secret 7f3a9c"


def holder(run: str) -> dict[str, object]:
    return {
        "id": run,
        "user": "alice",
        "command": "gpufleet drift --fix",
        "controller": "laptop1",
        "pid": 4242,
        "started": "2026-12-04T10:00:00+0000",
    }


@pytest.fixture
def lock(tmp_path: Path) -> Path:
    """The lock's path in a directory of its own (made by take), no legacy lock looked at."""
    (tmp_path / "run").mkdir(mode=0o755)
    return tmp_path / "run" / "gpufleet" / "run-lock.json"


def take(path: Path, run: str, break_lock: bool = False, legacy: Path | None = None) -> dict[str, object]:
    return run_lock.take(str(path), holder(run), break_lock, legacy_path=str(legacy) if legacy else None)


def test_one_holder_and_its_own_run_again(lock: Path) -> None:
    assert take(lock, "a") == {"changed": True, "notes": []}
    assert oct(lock.parent.stat().st_mode & 0o777) == "0o755"
    # the same run's later plays take it again, unchanged
    assert take(lock, "a") == {"changed": False, "notes": []}
    with pytest.raises(run_lock.Held) as refused:
        take(lock, "b")
    assert str(refused.value).startswith(
        "the node is held by gpufleet drift --fix by alice on laptop1 (pid 4242, "
        "started 2026-12-04T10:00:00+0000)"
    )
    assert "--break-lock" in str(refused.value) and refused.value.holder["id"] == "a"
    # another run's release leaves it; the holder's frees it
    assert run_lock.release(str(lock), "b")["changed"] is False
    assert run_lock.release(str(lock), "a") == {"changed": True, "holder": None}
    assert not lock.exists()


def test_racing_runs_get_it_once(lock: Path) -> None:
    won: list[str] = []
    start = threading.Barrier(8)

    def race(run: str) -> None:
        start.wait()
        try:
            take(lock, run)
            won.append(run)
        except run_lock.Held:
            pass

    threads = [threading.Thread(target=race, args=(f"run{i}",)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(won) == 1
    assert json.loads(lock.read_text())["id"] == won[0]


def test_a_dead_holder_is_broken_only_when_asked(lock: Path) -> None:
    take(lock, "dead")
    with pytest.raises(run_lock.Held):
        take(lock, "next")
    taken = take(lock, "next", break_lock=True)
    assert taken["changed"] is True
    (note,) = taken["notes"]
    assert note.startswith("broke the lock of gpufleet drift --fix by alice on laptop1 (pid 4242")
    kept = note.rsplit("kept in ", 1)[1]
    assert json.loads(Path(kept).read_text())["id"] == "dead"
    assert json.loads(lock.read_text())["id"] == "next"


def _secret(tmp_path: Path) -> Path:
    secret = tmp_path / "shadow"
    secret.write_text(SECRET)
    secret.chmod(0o600)
    return secret


def _plant(kind: str, lock: Path, tmp_path: Path) -> None:
    lock.parent.mkdir(mode=0o755, exist_ok=True)
    if kind == "symlink":
        lock.symlink_to(_secret(tmp_path))
    elif kind == "dangling symlink":
        lock.symlink_to(tmp_path / "nothing-here")
    elif kind == "FIFO":
        os.mkfifo(lock)
    elif kind == "directory":
        lock.mkdir()
    elif kind == "hard link":
        os.link(_secret(tmp_path), lock)
    elif kind == "forged record":
        # a holder's shape, with the escape codes that would clear the operator's screen
        lock.write_text(json.dumps({**holder("forged"), "user": "\x1b[2J\x1b[Hroot"}))
    elif kind == "not JSON":
        lock.write_text(SECRET)
    elif kind == "another owner's record":
        lock.write_text(json.dumps(holder("x")))
        os.chown(lock, 4242, 4242)


KINDS = {
    "symlink": "a symbolic link",
    "dangling symlink": "a symbolic link",
    "FIFO": "a FIFO",
    "directory": "a directory",
    "hard link": "a file with 2 hard links",
    "forged record": "that is no lock record gpufleet wrote",
    "not JSON": "that is no lock record gpufleet wrote",
    "another owner's record": "a file owned by uid 4242, not root",
}


@pytest.mark.parametrize("kind", list(KINDS))
def test_what_is_no_record_is_refused_at_once_named_and_moved_aside_by_break_lock(
    kind: str, lock: Path, tmp_path: Path
) -> None:
    if kind == "another owner's record" and os.geteuid() != 0:
        pytest.fail("run the unit tests as root (make test does): a file of another owner needs chown")
    _plant(kind, lock, tmp_path)
    started = time.monotonic()
    with pytest.raises(run_lock.Refused) as refused:
        take(lock, "a")
    message = str(refused.value)
    assert time.monotonic() - started < 1.0  # nothing waited on (a FIFO is never opened)
    assert message.startswith(f"the node lock {lock} is ") and KINDS[kind] in message, message
    assert "--break-lock" in message and refused.value.holder == {}
    # nothing of the file behind it, no control character
    assert SECRET not in message and "\x1b" not in message
    assert not isinstance(refused.value, run_lock.Held)

    taken = take(lock, "a", break_lock=True)
    assert time.monotonic() - started < 2.0
    (note,) = taken["notes"]
    assert note.startswith(f"{lock} was ") and KINDS[kind] in note and "moved to" in note
    assert SECRET not in note and "\x1b" not in note
    moved = Path(note.split("moved to ", 1)[1].split(" (", 1)[0])
    assert moved.is_symlink() or moved.exists()
    assert json.loads(lock.read_text())["id"] == "a"
    if kind in ("symlink", "hard link"):
        assert (tmp_path / "shadow").read_text() == SECRET  # its target untouched


def test_a_directory_only_root_writes_or_refused(tmp_path: Path) -> None:
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    with pytest.raises(run_lock.Refused, match=r"is writable by others \(mode 0777\)"):
        take(open_dir / "run-lock.json", "a")
    # a world-writable sticky directory (/run/lock, /tmp) holds no lock itself
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    with pytest.raises(run_lock.Refused, match="writable by others"):
        take(sticky / "run-lock.json", "a")
    # but may be above the lock's own directory
    assert take(sticky / "gpufleet" / "run-lock.json", "a")["changed"] is True
    # the lock's directory a symbolic link: the link is resolved, its target judged
    (tmp_path / "elsewhere").symlink_to(open_dir)
    with pytest.raises(run_lock.Refused, match=f"{open_dir} is writable by others"):
        take(tmp_path / "elsewhere" / "run-lock.json", "a")
    # a file where the directory should be
    (tmp_path / "file").write_text("")
    with pytest.raises(run_lock.Refused, match="is not a directory"):
        take(tmp_path / "file" / "run-lock.json", "a")
    assert not list(open_dir.iterdir()) and not list(sticky.glob("*.json"))


def test_a_directory_of_another_owner_is_refused(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.fail("run the unit tests as root (make test does): a directory of another owner needs chown")
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, 4242, 4242)
    with pytest.raises(run_lock.Refused, match="owned by uid 4242, not root"):
        take(theirs / "run-lock.json", "a")


def test_a_holder_that_could_not_be_read_back_is_refused(lock: Path) -> None:
    bad = {**holder("a"), "controller": "laptop\x1b[2J"}
    with pytest.raises(run_lock.Refused, match="cannot be written as a lock record") as refused:
        run_lock.take(str(lock), bad, legacy_path=None)
    assert "\x1b" not in str(refused.value)
    assert not lock.exists()


def test_an_older_gpufleets_lock_is_honoured_and_nothing_else_there_read(lock: Path, tmp_path: Path) -> None:
    legacy_dir = tmp_path / "lock"
    legacy_dir.mkdir()
    legacy_dir.chmod(0o1777)
    legacy = legacy_dir / "gpufleet-run.json"
    legacy.write_text(json.dumps(holder("old")))
    with pytest.raises(run_lock.Held, match=r"the lock .* of an older gpufleet") as refused:
        take(lock, "new", legacy=legacy)
    assert refused.value.holder["id"] == "old" and not lock.exists()
    taken = take(lock, "new", break_lock=True, legacy=legacy)
    (note,) = taken["notes"]
    assert note.startswith("broke the lock of gpufleet drift --fix by alice") and not legacy.exists()
    assert json.loads(lock.read_text())["id"] == "new"
    run_lock.release(str(lock), "new")
    # what a local user may put in /run/lock holds nothing and is left alone: never followed or opened
    for plant in ("symlink", "FIFO", "directory", "not JSON"):
        _plant(plant, legacy, tmp_path)
        assert take(lock, "new", legacy=legacy) == {"changed": True, "notes": []}
        run_lock.release(str(lock), "new")
        assert legacy.is_symlink() or legacy.exists()
        if legacy.is_dir() and not legacy.is_symlink():
            legacy.rmdir()
        else:
            legacy.unlink()


def test_release_leaves_what_is_not_its_record(lock: Path, tmp_path: Path) -> None:
    assert run_lock.release(str(tmp_path / "none" / "run-lock.json"), "a") == {
        "changed": False,
        "holder": None,
    }
    _plant("FIFO", lock, tmp_path)
    assert run_lock.release(str(lock), "a") == {"changed": False, "holder": None}
    assert lock.exists()


@pytest.mark.parametrize(
    "data",
    [b"", b"[1, 2]", b'{"id": "x"}', b"[" * 5000, json.dumps({**holder("a"), "pid": True}).encode()],
)
def test_records_of_the_wrong_shape_are_no_holders(data: bytes, lock: Path) -> None:
    lock.parent.mkdir()
    lock.write_bytes(data)
    assert run_lock.inspect(str(lock))[0] is None
    with pytest.raises(run_lock.Refused, match=f"a file of {min(len(data), 4097)} bytes|larger than any"):
        take(lock, "a")
