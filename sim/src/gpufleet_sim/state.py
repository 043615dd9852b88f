"""A simulated node's state: one JSON document per node, read and written under a lock.

Used by the fake tools inside the nodes (stdlib only, Python 3.11) and by the harness.
Settings that real Linux keeps in sysfs/configfs (ECN enables, CNP DSCP, RoCE mode and
ToS, MTU, traffic class) live only in the node's sysfs tree, never here, so a write
through the file and a read through a tool can never disagree.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

State = dict[str, Any]

STATE_FILE = "state.json"


def node_dir_from_env() -> Path:
    """The node directory a fake tool belongs to (baked into its wrapper script)."""
    value = os.environ.get("GPUFLEET_SIM_NODE_DIR")
    if not value:
        raise RuntimeError("GPUFLEET_SIM_NODE_DIR is not set: tool started outside a sim node")
    return Path(value)


def load(node_dir: Path) -> State:
    return load_file(node_dir / STATE_FILE)


def save(node_dir: Path, state: State) -> None:
    save_file(node_dir / STATE_FILE, state)


def locked(node_dir: Path) -> contextlib.AbstractContextManager[State]:
    """Read-modify-write of a node's state; concurrent tool calls serialise here."""
    return locked_file(node_dir / STATE_FILE, node_dir / "state.lock")


def load_file(path: Path) -> State:
    """A state document (a node's, a simulated switch's) from its JSON file."""
    data: State = json.loads(path.read_text(encoding="utf-8"))
    return data


def _encode(state: State) -> str:
    # One line, no indent: json's C encoder (an indented dump runs its pure-Python one, ~6 times slower;
    # the stand-in vLLM writes the state twice per request). Sorted keys keep the file deterministic.
    return json.dumps(state, sort_keys=True)


def save_file(path: Path, state: State) -> None:
    """Write ``state`` to ``path`` whole or not at all (a reader never sees half a file)."""
    _write(path, _encode(state))


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


@contextlib.contextmanager
def locked_file(path: Path, lock_path: Path) -> Iterator[State]:
    """Read-modify-write of the state file ``path`` under an exclusive lock on ``lock_path``; a state
    the block did not change is not written again (its file, and its modification time, stay as they were)."""
    with open(lock_path, "a+", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            before = path.read_text(encoding="utf-8")
            state: State = json.loads(before)
            yield state
            after = _encode(state)
            if after != before:
                _write(path, after)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def present_gpus(state: State) -> list[dict[str, Any]]:
    """GPUs on the bus, in nvidia-smi order (by PCI bus ID); index is the position."""
    gpus = [gpu for gpu in state["gpus"] if gpu.get("present", True)]
    return sorted(gpus, key=lambda gpu: str(gpu["pci_bus_id"]).lower())


def sysfs_bdf(nvsmi_bus_id: str) -> str:
    """nvidia-smi prints an 8-digit PCI domain (00000000:18:00.0); sysfs uses 4 (0000:18:00.0)."""
    domain, rest = nvsmi_bus_id.split(":", 1)
    return f"{int(domain, 16):04x}:{rest.lower()}"


def save_fault_record(state: State, fault: str, record: dict[str, Any]) -> None:
    """What a fault's inject did, kept for its clear (``state["fault_saved"][<fault>]``)."""
    state.setdefault("fault_saved", {})[fault] = record


def pop_fault_record(state: State, fault: str) -> dict[str, Any] | None:
    """The record a fault's inject kept, removed (None when it was never injected)."""
    record: dict[str, Any] | None = state.get("fault_saved", {}).pop(fault, None)
    return record
