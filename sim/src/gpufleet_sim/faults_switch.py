"""Switch and cabling faults: what leaves a host perfect and its RoCE traffic still lossy.

Leaf faults (``gpufleet-sim fault leaf01 switch-pfc-off``) edit the leaf's applied NVUE tree
(sim/nvue_state.py), as an operator's ``nv set ... ; nv config apply`` would, so gpufleet's
switch_qos role can put them back; ``switch-down`` makes the leaf's listener stop answering.

Service faults make the leaf's NVUE API misbehave (the state file's ``misbehave``, read by
sim/nvue.py on each request): ``switch-patch-400`` refuses every configuration PATCH (as a
platform without a feature would), ``switch-patch-500`` and ``switch-apply-500`` answer a PATCH or
the apply request with HTTP 500 (nvued failing), ``switch-slow-patch`` takes a PATCH and then sends
its answer one byte every ``SLOW_S`` seconds, ``switch-trickle`` sends every answer (status line and
headers too) that way. Modelled: what the client sees on the wire, and that a revision is left
pending. Not modelled: nvued's own logs, a 500 that half-merged a PATCH, an apply that a 500 still
started, TCP-level stalls (a listener that accepts and never answers is ``switch-down``'s cousin).
Cabling faults (``cable-swapped``, ``lldp-missing``) change what a node's lldpd hears (the NICs'
``neighbor``, sim/build.py's cabling) and are node faults (faults.py registers them).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpufleet_sim import nvue_state
from gpufleet_sim.state import State

Tree = dict[str, Any]
LeafFn = Callable[[Tree], None]

LOW_MTU = 1500
# the lossy class a stock (e.g. SONiC AZURE) map sends DSCP 26 to
LOSSY_PRIORITY = 0


def _profile(state: Tree, branch: str) -> Tree:
    node: Tree = state["applied"]["qos"][branch]["default-global"]
    return node


def _pfc_off(state: Tree) -> None:
    _profile(state, "pfc")["switch-priority"].pop(str(nvue_state.ROCE_PRIORITY), None)


def _pfc_on(state: Tree) -> None:
    _profile(state, "pfc")["switch-priority"][str(nvue_state.ROCE_PRIORITY)] = {}


def _ecn(value: str) -> LeafFn:
    def apply(state: Tree) -> None:
        tcs = _profile(state, "congestion-control")["traffic-class"]
        tcs.setdefault(str(nvue_state.ROCE_TRAFFIC_CLASS), {})["ecn"] = value

    return apply


def _dscp(priority: int) -> LeafFn:
    def apply(state: Tree) -> None:
        _profile(state, "mapping")["dscp"][str(nvue_state.ROCE_DSCP)] = {"switch-priority": priority}

    return apply


def _mtu(value: int) -> LeafFn:
    def apply(state: Tree) -> None:
        for interface in state["applied"]["interface"].values():
            interface["link"]["mtu"] = value

    return apply


def _down(flag: bool) -> LeafFn:
    def apply(state: Tree) -> None:
        state["down"] = flag

    return apply


# One byte every SLOW_S seconds: far slower than any deadline a client gives one request.
SLOW_S = 5.0


def _misbehave(how: str, value: Any = True) -> tuple[LeafFn, LeafFn]:
    def inject(state: Tree) -> None:
        state.setdefault("misbehave", {})[how] = value

    def clear(state: Tree) -> None:
        state.setdefault("misbehave", {}).pop(how, None)

    return inject, clear


LEAF_FAULTS: dict[str, tuple[LeafFn, LeafFn]] = {
    "switch-pfc-off": (_pfc_off, _pfc_on),
    "switch-ecn-off": (_ecn("disable"), _ecn("enable")),
    "switch-dscp-lossy": (_dscp(LOSSY_PRIORITY), _dscp(nvue_state.ROCE_PRIORITY)),
    "switch-mtu-low": (_mtu(LOW_MTU), _mtu(nvue_state.DEFAULT_MTU)),
    "switch-down": (_down(True), _down(False)),
    "switch-patch-400": _misbehave("patch-400"),
    "switch-patch-500": _misbehave("patch-500"),
    "switch-apply-500": _misbehave("apply-500"),
    "switch-slow-patch": _misbehave("slow-patch", SLOW_S),
    "switch-trickle": _misbehave("trickle", SLOW_S),
}


class LeafFaultError(ValueError):
    """An unknown leaf fault."""


def _known(name: str | None) -> None:
    if name is not None and name not in LEAF_FAULTS:
        raise LeafFaultError(
            f"unknown switch fault {name!r}; choose one of: {', '.join(sorted(LEAF_FAULTS))}"
        )


def inject_leaf(path: Path, name: str) -> bool:
    """Injects a fault on the leaf whose state file is ``path``; False when already there."""
    _known(name)
    with nvue_state.locked(path) as current:
        injected = current.setdefault("faults", [])
        if name in injected:
            return False
        LEAF_FAULTS[name][0](current)
        injected.append(name)
    return True


def clear_leaf(path: Path, name: str | None = None) -> list[str]:
    _known(name)
    with nvue_state.locked(path) as current:
        injected = current.setdefault("faults", [])
        names = [f for f in injected if name is None or f == name]
        for fault in reversed(names):
            LEAF_FAULTS[fault][1](current)
            injected.remove(fault)
    return names


# -- node-side cabling faults (registered in faults.FAULTS) ------------------------------------


def _second_half(state: State) -> list[dict[str, Any]]:
    nics: list[dict[str, Any]] = state["nics"]
    return nics[len(nics) // 2 :]


def swap_cables(state: State, sys_root: Path) -> None:
    """Two adjacent RoCE ports on the second leaf trade cables (its own inverse)."""
    half = _second_half(state)
    first, second = half[-2], half[-1]
    first["neighbor"], second["neighbor"] = second.get("neighbor"), first.get("neighbor")


def hide_neighbor(state: State, sys_root: Path) -> None:
    """The last RoCE port's lldpd hears nothing (a cable to an unmanaged patch panel, LLDP off)."""
    nic = _second_half(state)[-1]
    nic["neighbor_hidden"] = nic.pop("neighbor", None)


def show_neighbor(state: State, sys_root: Path) -> None:
    nic = _second_half(state)[-1]
    nic["neighbor"] = nic.pop("neighbor_hidden", None)


FAULTS = {
    "cable-swapped": (swap_cables, swap_cables),
    "lldp-missing": (hide_neighbor, show_neighbor),
}
