"""The tests that run a gpufleet playbook on this machine itself hold its real run lock
(/run/gpufleet/run-lock.json, where the run_lock module keeps it): one at a time, whichever xdist worker or
pytest process runs them (an flock beside the tests' temporary files)."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from pathlib import Path

import pytest

GUARD = Path("/tmp/gpufleet-tests-machine-run-lock.flock")


@pytest.fixture(autouse=True)
def machine_run_lock() -> Iterator[None]:
    with GUARD.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
