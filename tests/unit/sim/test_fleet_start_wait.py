"""The simulated fleet's start wait: as long as its node count needs (FleetConfig.start_wait), one
deadline for the whole start, and when it runs out every node, BMC or leaf still starting is named
with what it last answered. A fake clock and fake nodes: no fleet is started."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import paramiko
import pytest
from gpufleet_sim import control
from gpufleet_sim import fleet as fleet_mod
from gpufleet_sim.fleet import Fleet, FleetConfig, SimError, StartWait

from tests.unit.fake_clock import FakeClock


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock(1000.0)
    monkeypatch.setattr(fleet_mod, "time", fake)
    return fake


def test_the_wait_grows_with_the_node_count() -> None:
    one, twelve, slurm = FleetConfig(nodes=1), FleetConfig(nodes=12), FleetConfig(nodes=12, slurm=True)
    assert one.start_wait() == (53.0, "45 s + 8 s per node for 1")
    # 12 nodes on a loaded 2-core machine came up just after 60 s: the wait is twice that
    assert twelve.start_wait()[0] == 141.0 >= 2 * 60
    assert slurm.start_wait() == (171.0, "45 s + 8 s per node for 12 + 30 s for Slurm")
    waits = [FleetConfig(nodes=n).start_wait()[0] for n in (1, 2, 16, 64, 200)]
    assert waits == sorted(waits) and len(set(waits)) == len(waits)


def test_sim_up_waits_for_the_fleet_s_wait_and_the_supervisor_s_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clock: FakeClock
) -> None:
    """The supervisor's Fleet.up gives up first, naming what is still starting (its log says it)."""
    started: list[FakeNode] = []

    def popen(argv: list[str], **kwargs: Any) -> FakeNode:
        started.append(FakeNode())
        return started[-1]

    monkeypatch.setattr(control, "subprocess", SimpleNamespace(Popen=popen, DEVNULL=None))
    monkeypatch.setattr(control, "time", clock)
    begun = clock.now
    with pytest.raises(SimError, match="not ready within 171 s"):
        control.up(Fleet(tmp_path / "sim"), FleetConfig(nodes=12))
    assert clock.now - begun == pytest.approx(141.0 + control.SUPERVISOR_START_S, abs=0.2)
    assert started and started[0].terminated


def test_what_is_still_starting_is_named_when_the_wait_runs_out(clock: FakeClock) -> None:
    polls: dict[str, int] = {}

    def ready_after(name: str, rounds: int) -> fleet_mod.Probe:
        def probe() -> str | None:
            polls[name] = polls.get(name, 0) + 1
            return None if polls[name] > rounds else f"{name} not listening yet"

        return probe

    probes = {f"node{i:02d}": ready_after(f"node{i:02d}", i * 10) for i in range(1, 13)}
    probes["node11"] = ready_after("node11", 10**9)
    probes["node12"] = ready_after("node12", 10**9)
    wait = StartWait.of(20.0, "45 s + 8 s per node for 12")
    with pytest.raises(SimError) as raised:
        fleet_mod.wait_for("nodes", probes, wait)
    assert str(raised.value) == (
        "nodes: 2 of 12 still starting after 20 s (45 s + 8 s per node for 12): "
        "node11 (node11 not listening yet); node12 (node12 not listening yet)"
    )
    # every other node was polled until it answered: none waited behind a slow one
    assert all(polls[f"node{i:02d}"] == i * 10 + 1 for i in range(1, 11))


def test_every_part_ready_within_the_wait_ends_it(clock: FakeClock) -> None:
    answers = iter(["starting", "starting", None])
    start = clock.now
    fleet_mod.wait_for("BMCs", {"node01": lambda: next(answers)}, StartWait.of(5.0, "test"))
    assert clock.now - start == pytest.approx(0.1)


class FakeNode:
    """A node's unshare process: running (poll None) or exited with a code."""

    def __init__(self, returncode: int | None = None) -> None:
        self.returncode = returncode
        self.pid = 0
        self.terminated = False

    def poll(self) -> int | None:
        return self.returncode

    def terminate(self) -> None:
        self.terminated = True


def _fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slow: set[str], nodes: int) -> tuple[Fleet, Any]:
    fleet = Fleet(tmp_path)
    specs = fleet.specs(FleetConfig(nodes=nodes))
    fleet.processes = {s.name: FakeNode() for s in specs}  # type: ignore[dict-item]
    for spec in specs:
        spec.directory.mkdir(parents=True)
        (spec.directory / "sshd.log").write_text("Server listening on 127.0.1.2 port 2222.\n")

    def handshake(spec: Any, pkey: Any) -> None:
        if spec.name in slow:
            raise paramiko.SSHException("Error reading SSH protocol banner")

    monkeypatch.setattr(paramiko.Ed25519Key, "from_private_key_file", lambda path: None)
    monkeypatch.setattr(fleet, "_handshake", handshake)
    monkeypatch.setattr(fleet, "_record_inside", lambda spec: None)
    return fleet, specs


def test_the_nodes_wait_names_each_node_still_starting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clock: FakeClock
) -> None:
    fleet, specs = _fleet(tmp_path, monkeypatch, {"node07", "node12"}, nodes=12)
    allowed, why = FleetConfig(nodes=12).start_wait()
    start = clock.now
    with pytest.raises(SimError) as raised:
        fleet._wait_ready(specs, StartWait.of(allowed, why))
    assert str(raised.value) == (
        "nodes: 2 of 12 still starting after 141 s (45 s + 8 s per node for 12): "
        "node07 (sshd 127.0.1.8:2222: Error reading SSH protocol banner); "
        "node12 (sshd 127.0.1.13:2222: Error reading SSH protocol banner)"
    )
    assert clock.now - start == pytest.approx(141.0, abs=0.1)


def test_a_node_that_exits_while_starting_is_named_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clock: FakeClock
) -> None:
    fleet, specs = _fleet(tmp_path, monkeypatch, {"node02"}, nodes=3)
    start = clock.now
    fleet.processes["node02"] = FakeNode(returncode=1)  # type: ignore[assignment]
    with pytest.raises(SimError, match="node02 exited with 1 while starting: Server listening"):
        fleet._wait_ready(specs, StartWait.of(38.0, "test"))
    assert clock.now == start  # not waited out
