"""GPU faults: each is a change a real node goes through, applied to its state and sysfs."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from gpufleet_sim import sysfs, thermal
from gpufleet_sim.state import State

# What a PDU protection did to the reference node: every GPU capped ~300 W below its request.
POWER_CAP_DROP_W = 300.0
# pdu-cap-in-service: the same protection cycling while the node serves: capped for 5 s of every 10 s.
PDU_WAVE_CAPPED_S = 5.0
PDU_WAVE_PERIOD_S = 10.0


def power_capped(state: State, sys_root: Path) -> None:
    for gpu in state["gpus"]:
        power = gpu["power"]
        power["enforced_limit_w"] = max(power["requested_limit_w"] - POWER_CAP_DROP_W, power["min_limit_w"])


def power_capped_clear(state: State, sys_root: Path) -> None:
    for gpu in state["gpus"]:
        gpu["power"]["enforced_limit_w"] = gpu["power"]["requested_limit_w"]


def pdu_cap_in_service(state: State, sys_root: Path) -> None:
    """The enforced limit drops in waves from now on (thermal.capped_share); the request stays."""
    now = time.time()
    thermal.advance(state, now)
    state["pdu_cap"] = {
        "since": now,
        "drop_w": POWER_CAP_DROP_W,
        "capped_s": PDU_WAVE_CAPPED_S,
        "period_s": PDU_WAVE_PERIOD_S,
    }


def pdu_cap_in_service_clear(state: State, sys_root: Path) -> None:
    thermal.advance(state, time.time())
    state.pop("pdu_cap", None)


_PERSISTENCED = "nvidia-persistenced.service"


def persistence_off(state: State, sys_root: Path) -> None:
    """Someone stopped and disabled the driver's daemon (persistence goes with it)."""
    state["units"][_PERSISTENCED] = {"enabled": False, "active": False}
    for gpu in state["gpus"]:
        gpu["persistence_mode"] = False


def persistence_on(state: State, sys_root: Path) -> None:
    state["units"][_PERSISTENCED] = {"enabled": True, "active": True}
    for gpu in state["gpus"]:
        gpu["persistence_mode"] = True


def _swap_pair(state: State) -> tuple[dict[str, Any], dict[str, Any]]:
    # The GPUs either side of the baseboard boundary (last of domain 0, first of domain 1):
    # enumeration changes and their indices swap, yet each domain keeps its GPUs in the
    # same bus order. On a one-domain profile, the first two GPUs.
    ordered = state["gpus"]
    domains = sorted({g["nvlink_domain"] for g in ordered})
    if len(domains) < 2:
        return ordered[0], ordered[1]
    first = [g for g in ordered if g["nvlink_domain"] == domains[0]][-1]
    second = next(g for g in ordered if g["nvlink_domain"] == domains[1])
    return first, second


# Where a GPU sits (bus ID, socket, switch) moves; what it is (UUID, serial, NVLink board) stays.
_LOCATION = ("pci_bus_id", "numa_node", "switch")


def bus_order_swapped(state: State, sys_root: Path) -> None:
    first, second = _swap_pair(state)
    for key in _LOCATION:
        first[key], second[key] = second[key], first[key]


def take_off_bus(state: State, sys_root: Path, gpu: dict[str, Any]) -> None:
    """The GPU no longer answers on PCIe: gone from nvidia-smi and from sysfs."""
    gpu["present"] = False
    sysfs.remove_gpu(sys_root, state, gpu)


def put_on_bus(state: State, sys_root: Path, gpu: dict[str, Any]) -> None:
    if not gpu.get("present", True):
        gpu["present"] = True
        sysfs.render_gpu(sys_root, state, gpu)


def _last_on_bus(state: State) -> dict[str, Any]:
    # The last GPU in bus order, present or not: a reboot re-applies gpu-missing (boot.py) and must
    # not take a second GPU off the bus; its clear leaves a GPU another fault took off (xid-79).
    gpu: dict[str, Any] = max(state["gpus"], key=lambda g: str(g["pci_bus_id"]).lower())
    return gpu


def gpu_missing(state: State, sys_root: Path) -> None:
    take_off_bus(state, sys_root, _last_on_bus(state))


def gpu_missing_clear(state: State, sys_root: Path) -> None:
    put_on_bus(state, sys_root, _last_on_bus(state))


FAULTS = {
    "power-capped": (power_capped, power_capped_clear),
    "pdu-cap-in-service": (pdu_cap_in_service, pdu_cap_in_service_clear),
    "persistence-off": (persistence_off, persistence_on),
    # swapping the same pair again restores the original order
    "bus-order-swapped": (bus_order_swapped, bus_order_swapped),
    "gpu-missing": (gpu_missing, gpu_missing_clear),
}
