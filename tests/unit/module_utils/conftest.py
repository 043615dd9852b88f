"""A simulated Cumulus leaf over TLS on loopback, for the NVUE client and the switch_qos role."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from gpufleet_sim import nvue


@dataclass
class Leaf:
    address: str
    password: str
    state: Path
    ca: Path
    directory: Path


@pytest.fixture
def leaf(tmp_path: Path) -> Iterator[Leaf]:
    directory = tmp_path / "switches"
    password = nvue.prepare(directory, "leaf01", "127.0.0.1", ports=8)
    state = nvue.state_file(directory, "leaf01")
    context = nvue.context_for(directory / "leaf01.pem", directory / "leaf01-key.pem")
    listener = nvue.Listener(state, ("127.0.0.1", 0), context).start()
    try:
        yield Leaf(f"127.0.0.1:{listener.port}", password, state, directory / "ca.pem", directory)
    finally:
        listener.stop()
