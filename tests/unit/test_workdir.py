"""workdir: a run's private directory (ansible-runner's copy of the environment) is short-lived."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from gpufleet import runlock, workdir


def test_a_killed_runs_directory_is_removed_by_the_next_run_and_a_live_one_is_kept(tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live = tmp_path / f"{child.pid}-{runlock.process_start(child.pid)}-abc"
        live.mkdir()
        (live / "artifacts").mkdir()
        dead = tmp_path / f"{child.pid}-1-def"  # the same pid, another start: a reused pid
        dead.mkdir()
        with workdir.private_dir(tmp_path) as mine:
            assert mine.parent == tmp_path and mine.name.startswith(f"{os.getpid()}-")
            assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, mine.name])
        assert not mine.exists()
        assert oct(tmp_path.stat().st_mode & 0o777) == "0o700"
    finally:
        child.kill()
        child.wait()
    assert workdir.sweep(tmp_path) == [live]


def test_the_environment_copy_is_forgotten_once_the_playbook_runs(tmp_path: Path) -> None:
    command = tmp_path / "artifacts" / "abc" / "command"
    command.parent.mkdir(parents=True)
    command.write_text('{"env": {"SECRET": "x"}}')
    (command.parent / "stdout").write_text("kept")
    workdir.forget_environment(tmp_path)
    assert not command.exists() and (command.parent / "stdout").exists()


def _listens(temp: Path) -> bool:
    """Whether multiprocessing (ansible-playbook's local RPC server) can open its socket under ``temp``."""
    code = "from multiprocessing.connection import Listener; Listener(family='AF_UNIX').close()"
    env = dict(os.environ, TMPDIR=str(temp))
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True).returncode == 0


def _dir_of_length(tmp_path: Path, length: int) -> Path:
    pad = length - len(str(tmp_path)) - 1
    assert pad > 0
    path = tmp_path / ("d" * pad)
    path.mkdir()
    assert len(str(path)) == length
    return path


def _subdir(tmp_path: Path) -> Path:
    path = tmp_path / "x"
    path.mkdir()
    return path


def test_the_longest_temp_dir_allowed_is_the_longest_a_socket_fits_under(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    room = workdir.SOCKET_PATH_MAX - len("/pymp-XXXXXXXX/listener-XXXXXXXX")
    fits, too_long = _dir_of_length(tmp_path, room), _dir_of_length(_subdir(tmp_path), room + 1)
    assert _listens(fits) and not _listens(too_long)
    monkeypatch.setattr(tempfile, "tempdir", str(fits))
    workdir.check_temp_dir()
    monkeypatch.setattr(tempfile, "tempdir", str(too_long))
    with pytest.raises(
        workdir.TempDirTooLong, match=rf"TMPDIR\) is {room + 1} bytes long.*at most {room} bytes"
    ):
        workdir.check_temp_dir()
