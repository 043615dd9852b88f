"""The fault registry: `gpufleet-sim fault NODE FAULT [--clear]`.

A leaf's faults (`gpufleet-sim fault leaf01 switch-pfc-off`) are faults_switch.LEAF_FAULTS.

A fault is a pair (inject, clear) of functions taking the node's state and sysfs root.
Later issues add thermal, BMC and service faults by adding a module's FAULTS here.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from gpufleet_sim import (
    faults_gpu,
    faults_health,
    faults_rdma,
    faults_switch,
    faults_thermal,
    faults_tools,
    faults_topo,
    state,
)

FaultFn = Callable[[state.State, Path], None]

FAULTS: dict[str, tuple[FaultFn, FaultFn]] = {
    **faults_gpu.FAULTS,
    **faults_rdma.FAULTS,
    **faults_topo.FAULTS,
    **faults_thermal.FAULTS,
    **faults_switch.FAULTS,
    **faults_health.FAULTS,
    **faults_tools.FAULTS,
}


class FaultError(ValueError):
    """An unknown fault name or a clear of a fault that is not injected."""


def inject(node_dir: Path, name: str) -> bool:
    """Injects a fault; False when it was already there (nothing done)."""
    if name not in FAULTS:
        raise FaultError(f"unknown fault {name!r}; choose one of: {', '.join(sorted(FAULTS))}")
    with state.locked(node_dir) as current:
        if name in current["faults"]:
            return False
        FAULTS[name][0](current, node_dir / "sys")
        current["faults"].append(name)
    return True


def clear(node_dir: Path, name: str | None = None) -> list[str]:
    """Clears one fault, or every injected fault when name is None; returns what was cleared."""
    if name is not None and name not in FAULTS:
        raise FaultError(f"unknown fault {name!r}; choose one of: {', '.join(sorted(FAULTS))}")
    with state.locked(node_dir) as current:
        names = [f for f in current["faults"] if name is None or f == name]
        for fault in reversed(names):
            FAULTS[fault][1](current, node_dir / "sys")
            current["faults"].remove(fault)
    return names
