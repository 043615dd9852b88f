"""Simulated fleets for integration tests; each test module gets its own, on its own subnet."""

from __future__ import annotations

import ctypes
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpufleet.sim.fleet import Fleet, FleetConfig

_PR_SET_CHILD_SUBREAPER = 36


def pytest_configure(config: pytest.Config) -> None:
    if os.geteuid() != 0:
        raise pytest.UsageError("integration tests start simulated nodes in namespaces: run them as root")
    # Orphans of the processes tests start (ssh ControlPersist masters, the sim supervisor)
    # come back to this process, which reaps them, instead of to a PID 1 that does not.
    ctypes.CDLL(None).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def pytest_unconfigure(config: pytest.Config) -> None:
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass


def leftovers(root: Path) -> list[str]:
    """Processes still running from a fleet directory (looked up, never killed by name)."""
    found = []
    marker = str(root).encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if marker in (proc / "cmdline").read_bytes():
                found.append(proc.name)
        except OSError:
            continue
    return found


@pytest.fixture(scope="module")
def fleet_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    fleets: list[Fleet] = []

    def start(nodes: int, subnet: str, profile: str = "b300-16") -> Fleet:
        root = tmp_path_factory.mktemp("sim")
        fleet = Fleet(root)
        fleet.up(FleetConfig(nodes=nodes, profile=profile, subnet=subnet))
        fleets.append(fleet)
        return fleet

    yield start
    for fleet in fleets:
        fleet.stop()
        assert leftovers(fleet.root) == [], "a simulated node outlived its fleet"
        shutil.rmtree(fleet.root, ignore_errors=True)
