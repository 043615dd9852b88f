"""What a simulated fleet started, and stopping it for certain (no fleet needed).

A process that shrugs off SIGTERM still goes (SIGKILL after the grace), a recycled pid is never
taken for ours, and what cannot be stopped (here: a listener on a fleet address that the record
does not own) makes `sim down` fail naming it, keeping the fleet's files for another try.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from gpufleet_sim import control, processes
from gpufleet_sim.fleet import Fleet, SimError

STUBBORN = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)\n"
)


@pytest.fixture
def stubborn() -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", STUBBORN], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def _record_of(proc: subprocess.Popen[str], address: str = "127.0.0.1") -> dict[str, object]:
    found = processes.identify(proc.pid)
    assert found is not None
    return {"nodes": {"node01": {"address": address, "bmc": found.as_dict()}}}


def test_a_recorded_process_is_ours_only_with_its_start_time(stubborn: subprocess.Popen[str]) -> None:
    found = processes.identify(stubborn.pid)
    assert found is not None and processes.alive(found)
    assert not processes.alive(processes.Proc(stubborn.pid, found.start + 1))
    stubborn.kill()
    time.sleep(0.2)
    # killed but not yet waited for: a zombie is stopped
    assert not processes.alive(found)


def test_stop_escalates_to_sigkill(stubborn: subprocess.Popen[str]) -> None:
    record = _record_of(stubborn, address="127.0.0.251")
    assert processes.survivors(record) == [f"node01 bmc (pid {stubborn.pid})"]
    began = time.monotonic()
    assert processes.stop(record, grace=0.3, kill_wait=5.0) == []
    assert stubborn.wait(timeout=5) == -signal.SIGKILL
    assert time.monotonic() - began < 5


def test_the_supervisors_group_is_stopped_too(stubborn: subprocess.Popen[str]) -> None:
    # a process the record does not name, left in the (dead) supervisor's process group
    record = {"nodes": {}, "group": os.getpgid(stubborn.pid)}
    assert processes.survivors(record) == [f"process {stubborn.pid} in the supervisor's group {stubborn.pid}"]
    assert processes.stop(record, grace=0.3) == []
    assert stubborn.wait(timeout=5) == -signal.SIGKILL


def test_node_health_says_what_died(stubborn: subprocess.Popen[str]) -> None:
    sshd = processes.identify(stubborn.pid)
    assert sshd is not None
    parts: dict[str, object] = {"address": "127.0.0.251", "sshd": sshd.as_dict(), "bmc": sshd.as_dict()}
    record = {"nodes": {"node01": parts}}
    assert processes.node_health(record, "node01") == (True, "")
    stubborn.kill()
    stubborn.wait()
    assert processes.node_health(record, "node01") == (
        False,
        f"sshd (pid {stubborn.pid}) is gone; bmc (pid {stubborn.pid}) is gone",
    )
    parts["down"] = f"sshd (pid {stubborn.pid}) killed by SIGKILL"
    assert processes.node_health(record, "node01")[1].startswith(
        f"sshd (pid {stubborn.pid}) killed by SIGKILL"
    )
    assert processes.node_health(record, "node02") == (False, "no process recorded")


@pytest.mark.parametrize(
    ("returncode", "text"),
    [
        (-9, "killed by SIGKILL"),
        (-15, "killed by SIGTERM"),
        (0, "exited with status 0"),
        (255, "exited with status 255"),
    ],
)
def test_describe_exit(returncode: int, text: str) -> None:
    assert processes.describe_exit(returncode) == text


@pytest.mark.parametrize(
    ("returncode", "log", "why"),
    [
        (-9, "", "sshd (pid 42) killed by SIGKILL"),
        (
            1,
            "unshare: sigprocmask unblock failed: Invalid argument\n",
            "sshd (pid 42) was killed by a signal (this unshare does not say which)",
        ),
        (
            255,
            "Bind to port 2222 on 127.0.9.2 failed: Address already in use.\nCannot bind any address.\n",
            "sshd (pid 42) is gone, unshare exited with status 255 (Cannot bind any address.)",
        ),
        (0, "", "sshd (pid 42) is gone, unshare exited with status 0"),
    ],
)
def test_a_dead_node_says_what_died(tmp_path: Path, returncode: int, log: str, why: str) -> None:
    fleet = Fleet(tmp_path)
    fleet.record = {"nodes": {"node01": {"sshd": {"pid": 42, "start": 1}}}}
    (tmp_path / "nodes" / "node01").mkdir(parents=True)
    (tmp_path / "nodes" / "node01" / "sshd.log").write_text(log)
    assert fleet._why_down("node01", returncode) == why


def test_listeners_reads_proc_net_tcp() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.252", 0))
        port = server.getsockname()[1]
        assert f"127.0.0.252:{port}" not in processes.listeners(["127.0.0.252"])
        server.listen()
        assert processes.listeners(["127.0.0.252"]) == [f"127.0.0.252:{port}"]
        assert processes.listeners(["127.0.0.253"]) == []


def test_down_fails_naming_what_it_could_not_stop(tmp_path: Path, stubborn: subprocess.Popen[str]) -> None:
    fleet = Fleet(tmp_path)
    # the stubborn process is the fleet's; the listener (this test's own socket) is not
    with socket.socket() as server:
        server.bind(("127.0.0.254", 0))
        server.listen()
        port = server.getsockname()[1]
        processes.save(tmp_path, _record_of(stubborn, address="127.0.0.254"))
        fleet.fleet_file.write_text(json.dumps({"nodes": {}, "managed": False}))
        with pytest.raises(SimError, match=rf"still running: a listener on 127\.0\.0\.254:{port}$"):
            control.down(fleet, grace=0.2, kill_wait=0.5)
        assert stubborn.wait(timeout=5) == -signal.SIGKILL
        assert fleet.fleet_file.exists() and (tmp_path / processes.RECORD_FILE).exists()
        with pytest.raises(SimError, match="still runs"):
            control.up(fleet_without_file(fleet), control.FleetConfig(nodes=1, subnet="127.0.250"))
    assert control.down(fleet, grace=0.2, kill_wait=0.5) is True
    assert not fleet.fleet_file.exists() and not (tmp_path / processes.RECORD_FILE).exists()
    assert control.down(fleet) is False


def fleet_without_file(fleet: Fleet) -> Fleet:
    """The same fleet directory once its fleet.json is gone (a `sim down` that got half way)."""
    fleet.fleet_file.unlink()
    return fleet
