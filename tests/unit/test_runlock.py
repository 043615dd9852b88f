"""Changing runs on the same hosts never interleave; a lock whose holder died does not count."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpufleet import cli, runlock, runner


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A live process to stand for another gpufleet run (stopped at the end)."""
    proc = subprocess.Popen(["sleep", "60"])
    yield proc
    proc.kill()
    proc.wait()


def _record(directory: Path, pid: int, command: str, hosts: dict[str, str]) -> None:
    runs = directory / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    record = {
        "pid": pid,
        "pid_start": runlock.process_start(pid),
        "command": command,
        "started": "2026-12-03T14:00:00+0000",
        "hosts": hosts,
    }
    (runs / f"{pid}.json").write_text(json.dumps(record))


def test_overlapping_hosts_are_refused_naming_the_running_command(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    _record(tmp_path, sleeper.pid, "gpufleet gate", {"10.0.0.1": "node01", "10.0.0.2": "node02"})
    with (
        pytest.raises(runlock.Busy, match=rf"gpufleet gate \(pid {sleeper.pid}, started 2026-12-03T14:00:00"),
        runlock.hold("gpufleet drift --fix", {"10.0.0.2": "gpu-b"}, tmp_path),
    ):
        pass
    # Other machines are free, also while the first run holds its own.
    with runlock.hold("gpufleet provision", {"10.0.0.3": "node03"}, tmp_path):
        assert len(list((tmp_path / "runs").glob("*.json"))) == 2
    assert len(list((tmp_path / "runs").glob("*.json"))) == 1


def test_a_lock_whose_holder_died_is_taken_over(tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    _record(tmp_path, dead.pid, "gpufleet gate", {"10.0.0.1": "node01"})
    with runlock.hold("gpufleet provision", {"10.0.0.1": "node01"}, tmp_path):
        records = [json.loads(p.read_text()) for p in (tmp_path / "runs").glob("*.json")]
        assert [r["command"] for r in records] == ["gpufleet provision"]
    assert list((tmp_path / "runs").glob("*.json")) == []


def test_a_changing_command_on_held_hosts_is_exit_2_and_a_read_only_one_runs(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    sleeper: subprocess.Popen[bytes],
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("GPUFLEET_STATE_DIR", str(tmp_path / "state"))
    runs: list[str] = []

    def record(options: runner.RunOptions, progress: object = None) -> runner.RunResult:
        runs.append(options.playbook)
        return runner.RunResult(rc=0, status="successful", hosts={})

    monkeypatch.setattr(runner, "run_playbook", record)
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        "all:\n  children:\n    gpu_nodes:\n      hosts:\n        node01: {ansible_host: 10.0.0.1}\n"
    )
    _record(tmp_path / "state", sleeper.pid, "gpufleet gate", {"10.0.0.1": "node01"})
    argv = ["--inventory", str(inventory), "--report-dir", str(tmp_path / "r")]
    assert cli.main(["provision", *argv]) == 2
    assert f"gpufleet gate (pid {sleeper.pid}" in capsys.readouterr().err
    assert runs == []
    assert cli.main(["check", *argv]) == 0
    assert runs == ["provision.yml"]


def test_what_is_left_in_the_runs_directory_is_never_followed_or_waited_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A FIFO or a link where a record or the guard would be: no wait, no file written through."""
    runs = tmp_path / "runs"
    runs.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    os.mkfifo(runs / "111.json")
    (runs / "222.json").symlink_to(victim)
    (runs / "333.json").mkdir()
    # this run's own record's name, a link to someone's file
    (runs / f"{os.getpid()}.json").symlink_to(victim)
    started = time.monotonic()
    with runlock.hold("gpufleet provision", {"10.0.0.1": "node01"}, tmp_path):
        record = json.loads((runs / f"{os.getpid()}.json").read_text())
        assert record["command"] == "gpufleet provision"
    assert time.monotonic() - started < 2
    assert victim.read_text() == "precious\n"
    assert sorted(p.name for p in runs.iterdir()) == [".lock", "333.json"]
    err = capsys.readouterr().err
    assert "removed" in err and "222.json" in err and "ignored" in err and "333.json" in err

    (runs / ".lock").unlink()
    os.mkfifo(runs / ".lock")
    with (
        pytest.raises(runlock.Busy, match=r"guard .*\.lock is not a regular file"),
        runlock.hold("gpufleet provision", {"10.0.0.1": "node01"}, tmp_path),
    ):
        pass
    (runs / ".lock").unlink()
    (runs / ".lock").symlink_to(victim)
    with (
        pytest.raises(runlock.Busy, match="remove it if it is a link"),
        runlock.hold("gpufleet provision", {"10.0.0.1": "node01"}, tmp_path),
    ):
        pass
    assert victim.read_text() == "precious\n"


def test_the_wait_for_the_guard_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runlock, "GUARD_WAIT_S", 0.5)
    runs = tmp_path / "runs"
    runs.mkdir()
    holder = subprocess.Popen(["flock", str(runs / ".lock"), "sleep", "30"])
    try:
        time.sleep(0.5)  # flock(1) has it
        started = time.monotonic()
        with (
            pytest.raises(runlock.Busy, match=r"another gpufleet has held .* for over 0\.5 s"),
            runlock.hold("gpufleet gate", {"10.0.0.1": "node01"}, tmp_path),
        ):
            pass
        assert time.monotonic() - started < 3
    finally:
        holder.kill()
        holder.wait()


def test_a_process_start_reads_as_earlier_gpufleets_wrote_it() -> None:
    """Clock ticks since boot, /proc/PID/stat's field 22: a lock or private directory written by a
    gpufleet of another version (a run under way during an upgrade) is still known as alive."""

    for pid in (1, os.getpid()):
        field_22 = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
        assert runlock.process_start(pid) == field_22
    assert runlock.process_start(2**22 + 12345) is None
