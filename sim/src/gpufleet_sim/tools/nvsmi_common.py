"""What the fake nvidia-smi derives from a GPU's state, shared by its XML, text and CSV renderers.

Every renderer reads a value through here, so `-q`, `-q -x` and `--query-gpu` never disagree.
Values that state.json does not hold are derived deterministically (marked "simulated").
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpufleet_sim import state as sim_state
from gpufleet_sim import thermal
from gpufleet_sim.state import State, present_gpus

Gpu = dict[str, Any]

NA = "N/A"
DEPRECATED = "Requested functionality has been deprecated"

# Exit codes from the RETURN VALUE section of nvidia-smi(1).
RC_INVALID_ARGUMENT = 2
RC_NOT_FOUND = 6

# NVML clocks event reason bits (nvml.h nvmlClocksEventReason*), in the order nvidia-smi prints them.
REASON_BITS: dict[str, int] = {
    "gpu_idle": 0x1,
    "applications_clocks_setting": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
    "sync_boost": 0x10,
    "sw_thermal_slowdown": 0x20,
    "display_clocks_setting": 0x100,
}
SUPPORTED_REASONS_MASK = 0x1FF  # what an H100 reports as clocks_event_reasons.supported


class ToolError(Exception):
    """A failure nvidia-smi reports on stdout with a non-zero exit status."""

    def __init__(self, text: str, rc: int) -> None:
        super().__init__(text)
        self.text = text
        self.rc = rc


def load_live(node_dir: Path) -> State:
    """The node state with its GPUs as the thermal model has them now (temperatures, power, clocks,
    utilization, event reasons); what every read-only query prints."""
    return thermal.live(sim_state.load(node_dir), time.time())


def no_devices() -> ToolError:
    return ToolError("No devices were found\n", RC_NOT_FOUND)


def select_gpus(state: State, ids: str | None) -> list[tuple[int, Gpu]]:
    """The (index, gpu) pairs `-i` names: indices, UUIDs or PCI bus IDs, comma separated.

    An id that matches nothing ends the call with "No devices were found" (exit 6), as an
    empty selection does on a real node.
    """
    gpus = list(enumerate(present_gpus(state)))
    if not gpus:
        raise no_devices()
    if ids is None:
        return gpus
    chosen: list[tuple[int, Gpu]] = []
    for raw in ids.split(","):
        match = _match(gpus, raw.strip())
        if match is None:
            raise no_devices()
        if match not in chosen:
            chosen.append(match)
    return chosen


def _match(gpus: list[tuple[int, Gpu]], ident: str) -> tuple[int, Gpu] | None:
    if ident.isdigit():
        return next((pair for pair in gpus if pair[0] == int(ident)), None)
    wanted = _bus_key(ident)
    for pair in gpus:
        if ident.lower() == str(pair[1]["uuid"]).lower():
            return pair
        if wanted is not None and wanted == _bus_key(str(pair[1]["pci_bus_id"])):
            return pair
    return None


def _bus_key(text: str) -> tuple[int, int, int, int] | None:
    # nvidia-smi accepts 4- or 8-digit domains; compare the numbers, not the spelling.
    try:
        return bus_parts(text)
    except ValueError:
        return None


def bus_parts(bus_id: str) -> tuple[int, int, int, int]:
    """(domain, bus, device, function) of "00000000:13:00.0"."""
    domain, bus, rest = bus_id.split(":")
    device, function = rest.split(".")
    return int(domain, 16), int(bus, 16), int(device, 16), int(function, 16)


def watts(value: float) -> str:
    return f"{value:.2f} W"


def enabled(flag: bool) -> str:
    return "Enabled" if flag else "Disabled"


def yes_no(flag: bool) -> str:
    return "Yes" if flag else "No"


def architecture(gpu: Gpu) -> str:
    major = int(str(gpu["compute_cap"]).split(".")[0])
    return {7: "Volta", 8: "Ampere", 9: "Hopper", 10: "Blackwell", 12: "Blackwell"}.get(major, NA)


def active_reasons(gpu: Gpu) -> set[str]:
    """Active clocks event reasons; HW Slowdown is set whenever a HW thermal or power-brake slowdown is
    (as on the 8xH100 capture, where HW Power Brake Slowdown comes with HW Slowdown)."""
    active = {str(name) for name in gpu.get("clocks_event_reasons", []) if name in REASON_BITS}
    if active & {"hw_thermal_slowdown", "hw_power_brake_slowdown"}:
        active.add("hw_slowdown")
    return active


def reason_mask(gpu: Gpu) -> int:
    return sum(REASON_BITS[name] for name in active_reasons(gpu))


def reason_text(gpu: Gpu, name: str) -> str:
    return "Active" if name in active_reasons(gpu) else "Not Active"


# The reason counters (microseconds active) in nvidia-smi's order: canonical name (the CSV field's
# suffix), XML element suffix, -q text label. Values are the thermal model's (thermal.reasons_us).
REASON_COUNTERS: tuple[tuple[str, str, str], ...] = (
    ("sw_power_cap", "sw_power_cap", "SW Power Capping"),
    ("sync_boost", "sync_boost", "Sync Boost"),
    ("sw_thermal_slowdown", "sw_therm_slowdown", "SW Thermal Slowdown"),
    ("hw_thermal_slowdown", "hw_therm_slowdown", "HW Thermal Slowdown"),
    ("hw_power_brake_slowdown", "hw_power_brake", "HW Power Braking"),
)


def reason_counter_us(gpu: Gpu, name: str) -> int:
    return int(((gpu.get("thermal") or {}).get("reasons_us") or {}).get(name, 0))


def replay_counter(gpu: Gpu, now: float | None = None) -> int:
    """The GPU's PCIe replays since its reset: the fault pcie-replays makes them rise at ``per_s`` from
    ``t`` while it holds (``gpu["pcie"]["replays"]``: {t, per_s}); a healthy link replays none."""
    storm = (gpu.get("pcie") or {}).get("replays")
    if not storm:
        return 0
    now = time.time() if now is None else now
    return max(int((now - float(storm["t"])) * float(storm["per_s"])), 0)


def recovery_action(gpu: Gpu) -> str:
    """The driver's GPU Recovery Action (None, GPU Reset, Node Reboot, Drain P2P, Drain and Reset):
    the fault recovery-action-reboot sets it; a reboot clears it (sim/boot.py)."""
    return str(gpu.get("recovery_action") or "None")


def fabric(gpu: Gpu) -> tuple[str, str]:
    """The GPU's NVSwitch fabric registration, ``(state, status)`` as nvidia-smi prints it: Completed and
    Success on an HGX node whose Fabric Manager set up the fabric (the real 8x H100 -q capture); the
    fault fabric-manager-fault sets another (``gpu["fabric"]``: {state, status})."""
    found = gpu.get("fabric") or {}
    return str(found.get("state", "Completed")), str(found.get("status", "Success"))


def performance_state(gpu: Gpu) -> str:
    # Datacenter GPUs in persistence mode stay in P0 when idle (both utku H100 captures show P0).
    return "P0"


# Temperatures: T.Limit is the headroom to the slowdown temperature (gpufleet's sim convention);
# the threshold rows are offsets on that same scale, so a parser that compares them stays consistent.
def tlimit_c(gpu: Gpu) -> int:
    """Headroom to the max operating temperature: real GPUs print that limit as 0 on this scale."""
    temp = gpu["temperature"]
    return int(temp["max_operating_c"]) - int(temp["gpu_c"])


def tlimit_thresholds(gpu: Gpu) -> tuple[int, int, int]:
    """(shutdown, slowdown, max operating) on the T.Limit scale: -7, -2, 0 on the real captures."""
    temp = gpu["temperature"]
    limit = int(temp["max_operating_c"])
    return limit - int(temp["shutdown_c"]), limit - int(temp["slowdown_c"]), 0


# Memory (simulated where state.json has no figure).
def fb_memory(gpu: Gpu) -> tuple[int, int, int, int]:
    """(total, reserved, used, free) in MiB; reserved ~0.59% as on the H100/H200 captures."""
    total = int(gpu["memory_total_mib"])
    reserved = round(total * 0.00587)
    used = int(gpu.get("memory_used_mib", 0))
    return total, reserved, used, max(total - reserved - used, 0)


def bar1_memory(gpu: Gpu) -> tuple[int, int, int]:
    """BAR1 is the next power of two above the framebuffer (H100 131072, H200 262144 MiB)."""
    total = 1 << math.ceil(math.log2(int(gpu["memory_total_mib"])))
    used = int(gpu.get("memory_used_mib", 0)) + 1
    return total, used, total - used


def memory_util(gpu: Gpu) -> int:
    return round(int(gpu.get("utilization_pct", 0)) * 0.11)  # the H100 under gpu-burn: 100 % -> 11 %


def video_clock(graphics_mhz: int) -> int:
    return round(graphics_mhz * 1545 / 1980)  # H100: 1980 MHz graphics, 1545 MHz video


def remap_banks(gpu: Gpu) -> int:
    """Bank remap histogram "Max": 512 banks per HBM stack (H100 2560, H200 3072)."""
    total = int(gpu["memory_total_mib"])
    return 2560 if total < 100_000 else 3072 if total < 200_000 else 4096


# A GPU lowers its PCIe link to Gen1 when idle to save power and trains back to its maximum under
# load (the 590-driver Blackwell capture: current Gen 1 of max 4 at idle, x16 of x16); the width
# stays at its maximum. "Busy" is any utilisation the thermal model reports (it decays after a load).
IDLE_LINK_GEN = 1
BUSY_UTILIZATION_PCT = 1.0


@dataclass(frozen=True)
class PcieLink:
    gen_current: int
    gen_max: int  # what the link can reach: the lower of the GPU's and the host's maximum
    gen_device_max: int
    gen_host_max: int
    width_current: int
    width_max: int


def pcie_link(gpu: Gpu) -> PcieLink:
    """The GPU's PCIe link now. State: ``pcie.gen``/``pcie.width`` are the GPU's maxima (profile);
    a degraded link (the pcie-degraded fault) sets ``width_current`` and ``gen_limit``, the highest
    generation it trains to under load."""
    pcie = gpu["pcie"]
    device_max, width_max = int(pcie["gen"]), int(pcie["width"])
    host_max = int(pcie.get("host_gen", device_max))
    reachable = min(device_max, host_max, int(pcie.get("gen_limit", device_max)))
    busy = float(gpu.get("utilization_pct", 0)) >= BUSY_UTILIZATION_PCT
    return PcieLink(
        gen_current=reachable if busy else min(IDLE_LINK_GEN, reachable),
        gen_max=min(device_max, host_max),
        gen_device_max=device_max,
        gen_host_max=host_max,
        width_current=int(pcie.get("width_current", width_max)),
        width_max=width_max,
    )


def pcie_throughput_kbs(gpu: Gpu) -> tuple[int, int]:
    util = int(gpu.get("utilization_pct", 0))
    return 352 + 27 * util, 329 + 60 * util  # idle values of the H100 capture, rising with load


def supported_graphics_clocks(gpu: Gpu) -> list[int]:
    top = int(gpu["clocks"]["max_graphics_mhz"])
    return list(range(top, 344, -15))  # H100: 1980 down to 345 MHz in 15 MHz steps


# Identity strings (simulated, derived so they stay stable per GPU).
def board_id(gpu: Gpu) -> str:
    _, bus, device, _ = bus_parts(str(gpu["pci_bus_id"]))
    return f"0x{(bus << 8) | device:x}"


def pdi(gpu: Gpu) -> str:
    return "0x" + str(gpu["uuid"]).replace("-", "")[-16:].lower()


def gpu_part_number(gpu: Gpu) -> str:
    return str(gpu["pci_device_id"])[2:6].upper() + "-885-A1"


def inforom_image(gpu: Gpu) -> str:
    # board part 692-2G520-0200-000 -> image G520.0200.00.05, as on the H100 capture
    parts = str(gpu["board_part_number"]).split("-")
    if len(parts) < 3:
        return NA
    return f"{parts[1][1:]}.{parts[2]}.00.05"


def hex_id(value: str) -> str:
    """ "0x233010DE" -> "233010DE" (XML spelling); input may lack the 0x."""
    return value[2:].upper() if value.lower().startswith("0x") else value.upper()


def cpulist(state: State, numa: int) -> str:
    for node in state.get("numa_nodes", []):
        if int(node["id"]) == numa:
            return str(node["cpulist"])
    return ""
