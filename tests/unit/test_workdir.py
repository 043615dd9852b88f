"""workdir: a run's private directory (ansible-runner's copy of the environment) is short-lived."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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
