"""GPU faults: each is a change a real node goes through, applied to its state and sysfs."""

from __future__ import annotations

from pathlib import Path

from gpufleet.sim import sysfs
from gpufleet.sim.state import State, present_gpus

# What a PDU protection did to the reference node: every GPU capped ~300 W below its request.
POWER_CAP_DROP_W = 300.0


def power_capped(state: State, sys_root: Path) -> None:
    for gpu in state["gpus"]:
        power = gpu["power"]
        power["enforced_limit_w"] = max(power["requested_limit_w"] - POWER_CAP_DROP_W, power["min_limit_w"])


def power_capped_clear(state: State, sys_root: Path) -> None:
    for gpu in state["gpus"]:
        gpu["power"]["enforced_limit_w"] = gpu["power"]["requested_limit_w"]


def persistence_off(state: State, sys_root: Path) -> None:
    for gpu in state["gpus"]:
        gpu["persistence_mode"] = False


def persistence_on(state: State, sys_root: Path) -> None:
    for gpu in state["gpus"]:
        gpu["persistence_mode"] = True


def _swap_pair(state: State) -> tuple[dict[str, object], dict[str, object]]:
    # Two GPUs behind the same PCIe switch: the same board, NUMA node and NVLink domain,
    # so only enumeration (bus ID and index) changes; UUIDs stay with the physical GPU.
    first = next(g for g in state["gpus"] if g["slot"] == 0)
    second = next(g for g in state["gpus"] if g["slot"] == 1)
    return first, second


def bus_order_swapped(state: State, sys_root: Path) -> None:
    first, second = _swap_pair(state)
    first["pci_bus_id"], second["pci_bus_id"] = second["pci_bus_id"], first["pci_bus_id"]


def gpu_missing(state: State, sys_root: Path) -> None:
    gpu = present_gpus(state)[-1]
    gpu["present"] = False
    sysfs.remove_gpu(sys_root, state, gpu)


def gpu_missing_clear(state: State, sys_root: Path) -> None:
    for gpu in state["gpus"]:
        if not gpu.get("present", True):
            gpu["present"] = True
            sysfs.render_gpu(sys_root, state, gpu)


FAULTS = {
    "power-capped": (power_capped, power_capped_clear),
    "persistence-off": (persistence_off, persistence_on),
    # swapping the same pair again restores the original order
    "bus-order-swapped": (bus_order_swapped, bus_order_swapped),
    "gpu-missing": (gpu_missing, gpu_missing_clear),
}
